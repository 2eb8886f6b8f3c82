# A PyTorch training run's footprint on the host: train_compare's recorded allocation
# sequence replayed on two threads (bench_torch_trace.cpp; the sequence and its replay are
# the tests', tests/torch_sequence.h and tests/data).
add_executable(bench_torch_trace bench_torch_trace.cpp)
zarena_warnings(bench_torch_trace)
target_include_directories(bench_torch_trace PRIVATE ${PROJECT_SOURCE_DIR}/tests)
target_compile_definitions(bench_torch_trace PRIVATE ZARENA_TEST_DATA="${PROJECT_SOURCE_DIR}/tests/data")
target_link_libraries(bench_torch_trace PRIVATE zarena_static benchmark::benchmark)
