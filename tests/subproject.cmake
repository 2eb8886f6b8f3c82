# zarena built from source inside a parent project (add_subdirectory), as a superbuild or
# FetchContent user does: its tests, tools, benchmarks, examples and -Werror default OFF
# there, and the parent links zarena::zarena (tests/subproject/CMakeLists.txt checks both
# at configure time, from a fresh cache; the library itself is not compiled again).
set(_zarena_parent_dir ${CMAKE_CURRENT_BINARY_DIR}/subproject)
add_test(NAME subproject_fresh COMMAND ${CMAKE_COMMAND} -E rm -rf ${_zarena_parent_dir})
set_tests_properties(subproject_fresh PROPERTIES FIXTURES_SETUP zarena_parent TIMEOUT 60)
add_test(NAME subproject_defaults
  COMMAND ${CMAKE_COMMAND} -S ${CMAKE_CURRENT_SOURCE_DIR}/subproject -B ${_zarena_parent_dir}
    -G ${CMAKE_GENERATOR} -DZARENA_SOURCE=${PROJECT_SOURCE_DIR}
    -DCMAKE_C_COMPILER=${CMAKE_C_COMPILER} -DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}
    -DZARENA_WITH_CUDA=${ZARENA_WITH_CUDA})
set_tests_properties(subproject_defaults PROPERTIES LABELS "install" TIMEOUT 300
  FIXTURES_REQUIRED zarena_parent PASS_REGULAR_EXPRESSION "zarena as a subproject: defaults OK")
set_tests_properties(subproject_fresh PROPERTIES LABELS "install")
