# The Go mirror and the README's configuration table are printed from src/config/config_fields.h;
# CTest fails when the committed copies differ, and the zarena_config_gen target rewrites
# them.
add_executable(config_gen ${CMAKE_CURRENT_SOURCE_DIR}/config_gen.cpp)
zarena_warnings(config_gen)
target_include_directories(config_gen PRIVATE ${PROJECT_SOURCE_DIR}/src
  ${PROJECT_SOURCE_DIR}/capi/include)

add_test(NAME config_fields_in_sync COMMAND config_gen check ${PROJECT_SOURCE_DIR})
set_tests_properties(config_fields_in_sync PROPERTIES LABELS unit TIMEOUT 60)

add_custom_target(zarena_config_gen
  COMMAND config_gen write ${PROJECT_SOURCE_DIR}
  DEPENDS config_gen
  COMMENT "Writing go/config_fields_gen.go, go/internal/include/zarena/zarena.h and README.md's configuration table"
  VERBATIM)
