# The README's C and Go examples are the files that are built and run, verbatim; its
# Python example runs against the built library.
add_test(NAME readme_c_example_matches
  COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/check_readme.py ${PROJECT_SOURCE_DIR}
  $<TARGET_FILE:zarena>)
add_test(NAME quickstart_runs COMMAND quickstart)
set_tests_properties(quickstart_runs PROPERTIES LABELS unit TIMEOUT 60
  ENVIRONMENT "ZARENA_BACKEND=host;ZARENA_LOG_LEVEL=warn"
  PASS_REGULAR_EXPRESSION "epoch 100, high water")
set_tests_properties(readme_c_example_matches PROPERTIES LABELS unit TIMEOUT 180)
