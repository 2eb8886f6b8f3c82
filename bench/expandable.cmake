# Expandable arena: an allocation that commits against one that does not
# (bench_expandable.cpp; host rows everywhere, CUDA rows where a device is).
add_executable(bench_expandable bench_expandable.cpp)
zarena_warnings(bench_expandable)
target_link_libraries(bench_expandable PRIVATE zarena_static benchmark::benchmark)
