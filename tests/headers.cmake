# The public headers (zarena.h, zarena_testing.h and the experimental ones) compile as strict C99 and strict C++17,
# warning-free, and the programs built that way link and run against libzarena.so.
add_executable(zarena_header_c99 ${CMAKE_CURRENT_SOURCE_DIR}/header_check.c)
set_target_properties(zarena_header_c99 PROPERTIES C_STANDARD 99 C_STANDARD_REQUIRED ON
  C_EXTENSIONS OFF)
target_compile_options(zarena_header_c99 PRIVATE -std=c99 -pedantic -Wall -Wextra -Werror)

add_executable(zarena_header_cxx17 ${CMAKE_CURRENT_SOURCE_DIR}/header_check.cpp)
set_target_properties(zarena_header_cxx17 PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON
  CXX_EXTENSIONS OFF)
target_compile_options(zarena_header_cxx17 PRIVATE -std=c++17 -pedantic -Wall -Wextra -Werror)

foreach(t zarena_header_c99 zarena_header_cxx17)
  target_link_libraries(${t} PRIVATE zarena)
  add_test(NAME ${t} COMMAND ${t})
  set_tests_properties(${t} PROPERTIES LABELS "abi" TIMEOUT 60)
endforeach()

# zarena.h's table of contents lists every section of the header.
add_test(NAME zarena_header_contents COMMAND python3
  ${CMAKE_CURRENT_SOURCE_DIR}/check_header_toc.py ${PROJECT_SOURCE_DIR})
set_tests_properties(zarena_header_contents PROPERTIES LABELS "unit" TIMEOUT 60)
