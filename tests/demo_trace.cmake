# The demo's trace path (scripts/demo.sh): examples/training_loop records a trace with
# cfg.trace_file, zarena-replay answers from it and draws the picture.
# (examples/ is added after tests/: its target is named through the option, not TARGET.)
if(ZARENA_BUILD_EXAMPLES AND TARGET zarena-replay)
  add_test(NAME demo_trace_replays
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/check_demo_trace.sh $<TARGET_FILE:training_loop>
    $<TARGET_FILE:zarena-replay> ${CMAKE_CURRENT_BINARY_DIR}/demo_trace)
  set_tests_properties(demo_trace_replays PROPERTIES LABELS unit TIMEOUT 300)
endif()
