# The kernels of gpu_test_graphs (tests/gpu_graph_kernels.cu), compiled to PTX by nvcc at
# build time and embedded in the test as a string: the driver compiles them for the device
# it runs on (cudaLibraryLoadData), so the bundle needs no GPU code and the GPU machine no
# compiler. Without nvcc the suite still builds, and its kernel tests skip saying why.
if(ZARENA_HAVE_CUDA AND TARGET gpu_test_graphs AND CUDAToolkit_NVCC_EXECUTABLE)
  set(_ptx ${CMAKE_CURRENT_BINARY_DIR}/gpu_graph_kernels.ptx)
  set(_hdr ${CMAKE_CURRENT_BINARY_DIR}/gpu_graph_kernels.h)
  add_custom_command(OUTPUT ${_ptx}
    COMMAND ${CUDAToolkit_NVCC_EXECUTABLE} -ptx -arch=compute_75
      ${CMAKE_CURRENT_SOURCE_DIR}/gpu_graph_kernels.cu -o ${_ptx}
    DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/gpu_graph_kernels.cu
    COMMENT "nvcc -ptx gpu_graph_kernels.cu" VERBATIM)
  add_custom_command(OUTPUT ${_hdr}
    COMMAND ${CMAKE_COMMAND} -DIN=${_ptx} -DOUT=${_hdr} -P
      ${PROJECT_SOURCE_DIR}/cmake/embed_text.cmake
    DEPENDS ${_ptx} ${PROJECT_SOURCE_DIR}/cmake/embed_text.cmake VERBATIM)
  add_custom_target(gpu_graph_kernels DEPENDS ${_hdr})
  add_dependencies(gpu_test_graphs gpu_graph_kernels)
  target_include_directories(gpu_test_graphs PRIVATE ${CMAKE_CURRENT_BINARY_DIR})
  target_compile_definitions(gpu_test_graphs PRIVATE ZTEST_GRAPH_KERNELS=1)
endif()
