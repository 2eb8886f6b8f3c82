# The README's C example is examples/quickstart.c, verbatim, and it runs.
add_test(NAME readme_c_example_matches
  COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/check_readme.py ${PROJECT_SOURCE_DIR})
add_test(NAME quickstart_runs COMMAND quickstart)
set_tests_properties(quickstart_runs PROPERTIES LABELS unit
  ENVIRONMENT "ZARENA_BACKEND=host;ZARENA_LOG_LEVEL=warn"
  PASS_REGULAR_EXPRESSION "epoch 100, high water")
set_tests_properties(readme_c_example_matches PROPERTIES LABELS unit)
