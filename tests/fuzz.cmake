# The C API fuzz target (tests/fuzz/fuzz_arena.cpp): always built as a deterministic
# replay test over the corpus in tests/fuzz/corpus plus pseudo-random programs; also as a
# libFuzzer binary when ZARENA_BUILD_FUZZ is on (cmake/sanitizers.cmake: clang, and the
# library instrumented with it). docs/RELIABILITY.md has the long runs:
#   CC=clang CXX=clang++ cmake -S . -B build-fuzz -DZARENA_BUILD_FUZZ=ON -DZARENA_WITH_CUDA=OFF
#   cmake --build build-fuzz --target fuzz_arena
#   build-fuzz/tests/fuzz_arena -max_total_time=600 work-corpus tests/fuzz/corpus
add_executable(fuzz_arena_replay ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_arena.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/replay_main.cpp)
zarena_warnings(fuzz_arena_replay)
# Only the C API: what zarena_static needs (Threads, the CUDA runtime) it brings itself.
target_link_libraries(fuzz_arena_replay PRIVATE zarena_static)
target_include_directories(fuzz_arena_replay PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
add_test(NAME fuzz_arena_replay
  COMMAND fuzz_arena_replay 300 20261129 ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus)
set_tests_properties(fuzz_arena_replay PROPERTIES LABELS unit TIMEOUT 300)
if(ZARENA_BUILD_FUZZ)
  add_executable(fuzz_arena ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_arena.cpp)
  target_link_options(fuzz_arena PRIVATE -fsanitize=fuzzer)
  target_link_libraries(fuzz_arena PRIVATE zarena_static)
endif()
