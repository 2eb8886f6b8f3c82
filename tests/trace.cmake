# The trace suites link the writer, the reader and the replay tool's library, and the
# tool's own tests run the installed-name executable.
if(NOT TARGET zarena_replay_core)
  message(FATAL_ERROR "the trace tests need the tools (ZARENA_BUILD_TOOLS=ON)")
endif()
foreach(t test_trace_format test_trace_replay test_trace_tool test_trace_engine
    test_trace_edges test_fork)
  if(TARGET ${t})
    target_link_libraries(${t} PRIVATE zarena_trace zarena_trace_reader zarena_replay_core)
  endif()
endforeach()
if(TARGET test_trace_tool)
  set_property(TEST test_trace_tool APPEND PROPERTY ENVIRONMENT
    "ZTEST_REPLAY=$<TARGET_FILE:zarena-replay>"
    "ZTEST_TRACE_SAMPLE=$<TARGET_FILE:trace_sample>")
  add_dependencies(test_trace_tool zarena-replay trace_sample)
endif()

# A sample trace of the original failure (weights, then per-sample passes that never
# reset, with tags), written through the tracer; the picture is drawn from it.
add_executable(trace_sample ${CMAKE_CURRENT_SOURCE_DIR}/trace_sample.cpp)
zarena_warnings(trace_sample)
target_include_directories(trace_sample PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(trace_sample PRIVATE zarena_trace zarena_replay_core GTest::gtest)

# The picture is well-formed XML (parsed by Python's XML parser), and the Chrome trace is
# JSON with the events Perfetto needs.
add_test(NAME trace_picture_is_well_formed
  COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/check_trace_outputs.py
  $<TARGET_FILE:trace_sample> $<TARGET_FILE:zarena-replay>
  ${CMAKE_CURRENT_BINARY_DIR}/trace_picture)
set_tests_properties(trace_picture_is_well_formed PROPERTIES LABELS unit TIMEOUT 180)
