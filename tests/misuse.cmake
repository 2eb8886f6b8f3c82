# test_misuse checks that docs/RELIABILITY.md lists its rows as it runs them.
if(TARGET test_misuse)
  target_compile_definitions(test_misuse PRIVATE ZARENA_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
endif()
