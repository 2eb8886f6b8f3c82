# A PyTorch training run's footprint on the host: train_compare's recorded allocation
# sequence replayed on two threads (bench_torch_trace.cpp; the data in bench/data).
add_executable(bench_torch_trace bench_torch_trace.cpp)
zarena_warnings(bench_torch_trace)
target_compile_definitions(bench_torch_trace PRIVATE ZARENA_BENCH_DATA="${CMAKE_CURRENT_SOURCE_DIR}/data")
target_link_libraries(bench_torch_trace PRIVATE zarena_static benchmark::benchmark)
