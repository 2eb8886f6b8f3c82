# The C API fuzz target: always built as a deterministic replay test; also as a
# libFuzzer binary when the compiler is clang and ZARENA_BUILD_FUZZ is on:
#   CC=clang CXX=clang++ cmake -S . -B build-fuzz -DZARENA_BUILD_FUZZ=ON
#   build-fuzz/tests/fuzz_arena -max_total_time=60
option(ZARENA_BUILD_FUZZ "Build the libFuzzer target (clang only)" OFF)
add_executable(fuzz_arena_replay ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_arena.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/replay_main.cpp)
zarena_warnings(fuzz_arena_replay)
# Only the C API: what zarena_static needs (Threads, the CUDA runtime) it brings itself.
target_link_libraries(fuzz_arena_replay PRIVATE zarena_static)
add_test(NAME fuzz_arena_replay COMMAND fuzz_arena_replay 300)
set_tests_properties(fuzz_arena_replay PROPERTIES LABELS unit TIMEOUT 300)
if(ZARENA_BUILD_FUZZ AND CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  add_executable(fuzz_arena ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_arena.cpp)
  target_compile_options(fuzz_arena PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_arena PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_arena PRIVATE zarena_static)
endif()
