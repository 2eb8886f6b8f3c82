# Trace capture and the trace reader. The writer (trace.cpp, trace_registry.cpp) is part
# of the engine (src/CMakeLists.txt): zarena_trace only names its headers for the tests
# and benchmarks that call it directly (the code comes with zarena_static). The reader is
# for the replay tool and tests and never goes into libzarena.
add_library(zarena_trace INTERFACE)
target_link_libraries(zarena_trace INTERFACE zarena_internal Threads::Threads)

add_library(zarena_trace_reader STATIC ${CMAKE_CURRENT_LIST_DIR}/trace_reader.cpp)
zarena_warnings(zarena_trace_reader)
target_include_directories(zarena_trace_reader PUBLIC ${CMAKE_CURRENT_LIST_DIR}/..)
