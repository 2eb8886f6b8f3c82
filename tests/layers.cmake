# src/ follows the layer map of docs/ARCHITECTURE.md: no include runs up the layers, no
# include cycle (tests/check_layers.py reads the map from the document).
add_test(NAME layers_point_down
  COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/check_layers.py ${PROJECT_SOURCE_DIR})
set_tests_properties(layers_point_down PROPERTIES LABELS unit TIMEOUT 60)
