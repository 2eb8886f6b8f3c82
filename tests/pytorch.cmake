# PyTorch with zarena as its CUDA allocator against the default allocator: the same small
# transformer trained in two processes (tests/pytorch/train_compare.py). Label gpu: it exits
# 77 ("skipped: ...") without torch or without a CUDA device, which CTest shows as skipped.
# The figures land in <build>/torch_train_compare.json. Its --dry-run (no torch, no GPU) is
# run by the Python suite (tests/python/test_train_compare.py).
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME torch_train_compare COMMAND ${Python3_EXECUTABLE}
    ${CMAKE_CURRENT_SOURCE_DIR}/pytorch/train_compare.py
    --json ${PROJECT_BINARY_DIR}/torch_train_compare.json)
  set_tests_properties(torch_train_compare PROPERTIES LABELS "gpu" TIMEOUT 1200
    SKIP_RETURN_CODE 77 ENVIRONMENT
    "ZARENA_LIBRARY=$<TARGET_FILE:zarena>;ZARENA_TORCH_LIBRARY=$<TARGET_FILE:zarena_torch>")
  # Graph-stable steps (issue 33): the step captured once and replayed, against eager runs
  # and PyTorch's own graph capture (tests/pytorch/graph_compare.py).
  add_test(NAME torch_graph_compare COMMAND ${Python3_EXECUTABLE}
    ${CMAKE_CURRENT_SOURCE_DIR}/pytorch/graph_compare.py
    --json ${PROJECT_BINARY_DIR}/torch_graph_compare.json)
  set_tests_properties(torch_graph_compare PROPERTIES LABELS "gpu" TIMEOUT 1500
    SKIP_RETURN_CODE 77 ENVIRONMENT
    "ZARENA_LIBRARY=$<TARGET_FILE:zarena>;ZARENA_TORCH_LIBRARY=$<TARGET_FILE:zarena_torch>")
  # A failed allocation raises in Python and the process goes on (tests/pytorch/oom_raises.py).
  add_test(NAME torch_oom_raises COMMAND ${Python3_EXECUTABLE}
    ${CMAKE_CURRENT_SOURCE_DIR}/pytorch/oom_raises.py)
  set_tests_properties(torch_oom_raises PROPERTIES LABELS "gpu" TIMEOUT 300
    SKIP_RETURN_CODE 77 ENVIRONMENT
    "ZARENA_LIBRARY=$<TARGET_FILE:zarena>;ZARENA_TORCH_LIBRARY=$<TARGET_FILE:zarena_torch>")
  # The default capacity is the device's memory, committed on demand; empty_cache gives
  # back what lies above the top (tests/pytorch/default_capacity.py).
  add_test(NAME torch_default_capacity COMMAND ${Python3_EXECUTABLE}
    ${CMAKE_CURRENT_SOURCE_DIR}/pytorch/default_capacity.py)
  set_tests_properties(torch_default_capacity PROPERTIES LABELS "gpu" TIMEOUT 300
    SKIP_RETURN_CODE 77 ENVIRONMENT
    "ZARENA_LIBRARY=$<TARGET_FILE:zarena>;ZARENA_TORCH_LIBRARY=$<TARGET_FILE:zarena_torch>")
endif()

# The shim's failure path on the host (tests/test_torch_shim.cpp): it dlopens the library
# as PyTorch does, from the path compiled in.
target_compile_definitions(test_torch_shim PRIVATE
  ZARENA_TORCH_LIBRARY_PATH="$<TARGET_FILE:zarena_torch>")
target_include_directories(test_torch_shim PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(test_torch_shim PRIVATE ${CMAKE_DL_LIBS})
add_dependencies(test_torch_shim zarena_torch)
