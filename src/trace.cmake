# Trace capture (the writer the engine calls) and the trace reader (for the replay tool
# and tests). The writer is an object library so the engine can take its objects into
# libzarena when it starts calling it; the reader never goes into libzarena.
add_library(zarena_trace OBJECT ${CMAKE_CURRENT_LIST_DIR}/trace.cpp
  ${CMAKE_CURRENT_LIST_DIR}/trace_registry.cpp)
zarena_warnings(zarena_trace)
target_include_directories(zarena_trace PUBLIC ${CMAKE_CURRENT_LIST_DIR}
  ${PROJECT_SOURCE_DIR}/capi/include)
set_target_properties(zarena_trace PROPERTIES CXX_VISIBILITY_PRESET hidden
  VISIBILITY_INLINES_HIDDEN ON)
target_link_libraries(zarena_trace PUBLIC Threads::Threads)

add_library(zarena_trace_reader STATIC ${CMAKE_CURRENT_LIST_DIR}/trace_reader.cpp)
zarena_warnings(zarena_trace_reader)
target_include_directories(zarena_trace_reader PUBLIC ${CMAKE_CURRENT_LIST_DIR})
