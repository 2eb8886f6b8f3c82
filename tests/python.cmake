# The Python ctypes binding (examples/python/zarena.py), exercised through unittest against
# the freshly built libzarena.so.1.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME python_ctypes COMMAND ${Python3_EXECUTABLE} -m unittest discover -v
    -s ${CMAKE_CURRENT_SOURCE_DIR}/python -p "test_*.py")
  set_tests_properties(python_ctypes PROPERTIES LABELS "python" TIMEOUT 300
    ENVIRONMENT "ZARENA_LIBRARY=$<TARGET_FILE:zarena>;PYTHONDONTWRITEBYTECODE=1")
else()
  message(STATUS "zarena: python3 not found; the Python suite is not registered")
endif()
