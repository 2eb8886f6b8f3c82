# Sanitizer and fuzzing builds. Both instrument every target of the project, the library
# included (a fuzzer that cannot see the library's branches, or an ASan that does not
# check its memory, tests little). scripts/test.sh configures one build folder each:
#   -DZARENA_SANITIZE=address,undefined   ASan + UBSan (any UBSan report is fatal)
#   -DZARENA_SANITIZE=thread              TSan
#   -DZARENA_BUILD_FUZZ=ON (clang)        -fsanitize=fuzzer-no-link,address,undefined
#                                         everywhere; tests/fuzz_arena links libFuzzer
# docs/RELIABILITY.md says how to run each and for how long.
set(ZARENA_SANITIZE "" CACHE STRING "Sanitizers for every target, e.g. address,undefined or thread")
option(ZARENA_BUILD_FUZZ "Build the libFuzzer target, library instrumented too (clang only)" OFF)

set(_zarena_san "${ZARENA_SANITIZE}")
if(ZARENA_BUILD_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "ZARENA_BUILD_FUZZ needs clang (libFuzzer): CXX=clang++ CC=clang")
  endif()
  set(_zarena_san "fuzzer-no-link,address,undefined")
endif()
if(_zarena_san)
  add_compile_options(-fsanitize=${_zarena_san} -fno-omit-frame-pointer
    -fno-sanitize-recover=all)
  string(REPLACE "fuzzer-no-link," "" _zarena_san_link "${_zarena_san}")
  add_link_options(-fsanitize=${_zarena_san_link})
  message(STATUS "zarena: instrumented with -fsanitize=${_zarena_san}")
endif()
