# Trace capture cost (bench_trace.cpp); the writer is linked in directly.
add_executable(bench_trace bench_trace.cpp)
zarena_warnings(bench_trace)
target_link_libraries(bench_trace PRIVATE zarena_trace zarena_static benchmark::benchmark
  Threads::Threads)
if(ZARENA_HAVE_CUDA)
  target_link_libraries(bench_trace PRIVATE CUDA::cudart_static)
endif()

# The cost of tracing as a program sees it: the C API through the shared library, with and
# without cfg.trace_file (bench_trace_api.cpp; the figure docs/PERFORMANCE.md reports).
add_executable(bench_trace_api bench_trace_api.cpp)
zarena_warnings(bench_trace_api)
target_link_libraries(bench_trace_api PRIVATE zarena benchmark::benchmark)
