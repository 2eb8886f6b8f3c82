# Install into a temporary prefix and build consumers against it (find_package,
# pkg-config, and the Go bindings when present).
set(ZARENA_CONSUMER_ARGS "")
set(ZARENA_CONSUMER_HIDE_CUDA "")
if(ZARENA_HAVE_CUDA)
  if(CUDAToolkit_LIBRARY_ROOT)
    set(ZARENA_CONSUMER_ARGS "-DCUDAToolkit_ROOT=${CUDAToolkit_LIBRARY_ROOT}")
  endif()
  # Where the consumer could find the toolkit, hidden for the "without CUDA" case.
  get_filename_component(ZARENA_CUDA_BIN_PARENT "${CUDAToolkit_BIN_DIR}" DIRECTORY)
  string(JOIN ":" ZARENA_CONSUMER_HIDE_CUDA ${ZARENA_CUDA_BIN_PARENT}
    ${CUDAToolkit_LIBRARY_ROOT} ${CUDAToolkit_TARGET_DIR})
endif()
add_test(NAME install_consumers COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/check_install.sh
  ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR} ${CMAKE_COMMAND} ${CMAKE_C_COMPILER}
  ${CMAKE_INSTALL_LIBDIR})
set_tests_properties(install_consumers PROPERTIES LABELS "install" TIMEOUT 900
  ENVIRONMENT "ZTEST_CONSUMER_CMAKE_ARGS=${ZARENA_CONSUMER_ARGS};ZTEST_CONSUMER_HIDE_CUDA=${ZARENA_CONSUMER_HIDE_CUDA}")
# scripts/demo.sh builds zarena_installable; every installed target must be in it.
add_test(NAME install_set_complete COMMAND python3
  ${CMAKE_CURRENT_SOURCE_DIR}/check_install_set.py ${PROJECT_SOURCE_DIR})
set_tests_properties(install_set_complete PROPERTIES LABELS "unit;install" TIMEOUT 60)
