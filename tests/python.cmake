# The Python package (python/zarena), exercised through unittest against the freshly built
# libzarena.so.1, and installed with pip (offline) into a temporary target and used from
# outside the source tree.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME python_ctypes COMMAND ${Python3_EXECUTABLE} -m unittest discover -v
    -s ${CMAKE_CURRENT_SOURCE_DIR}/python -p "test_*.py")
  set_tests_properties(python_ctypes PROPERTIES LABELS "python" TIMEOUT 300
    ENVIRONMENT "ZARENA_LIBRARY=$<TARGET_FILE:zarena>;PYTHONDONTWRITEBYTECODE=1;CC=${CMAKE_C_COMPILER}")
  add_test(NAME python_install COMMAND ${Python3_EXECUTABLE}
    ${CMAKE_CURRENT_SOURCE_DIR}/python_install.py ${PROJECT_SOURCE_DIR} $<TARGET_FILE:zarena>
    $<TARGET_FILE:zarena_torch>)
  set_tests_properties(python_install PROPERTIES LABELS "python;install" TIMEOUT 300
    ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1")
else()
  message(STATUS "zarena: python3 not found; the Python suite is not registered")
endif()
