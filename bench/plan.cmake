# The offset planner (bench_plan.cpp): planning time and quality for synthetic training
# steps of 1k, 10k and 100k allocations. The step generator is the tests' (tests/).
add_executable(bench_plan bench_plan.cpp)
zarena_warnings(bench_plan)
target_include_directories(bench_plan PRIVATE ${PROJECT_SOURCE_DIR}/tests)
target_link_libraries(bench_plan PRIVATE zarena_static zarena_internal benchmark::benchmark)
