# ABI suites: symbol hygiene of libzarena.so and the abidiff check against the committed
# baseline. The baseline for the current major is refreshed with
#   cmake --build <build> --target zarena_abi_baseline   (see docs/ABI.md)
set(ZARENA_PUBLIC_HEADERS_DIR ${PROJECT_SOURCE_DIR}/capi/include/zarena)
set(ZARENA_ABI_BASELINE ${PROJECT_SOURCE_DIR}/abi/libzarena.so.${PROJECT_VERSION_MAJOR}.abi)

add_test(NAME abi_symbols COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/check_symbols.sh
  $<TARGET_FILE:zarena> ${ZARENA_PUBLIC_HEADERS_DIR} ${PROJECT_VERSION_MAJOR}
  ${PROJECT_SOURCE_DIR}/cmake/zarena.map)
set_tests_properties(abi_symbols PROPERTIES LABELS "abi" TIMEOUT 120)

add_test(NAME abi_baseline COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/check_abi.sh
  $<TARGET_FILE:zarena> ${ZARENA_PUBLIC_HEADERS_DIR} ${ZARENA_ABI_BASELINE})
set_tests_properties(abi_baseline PROPERTIES LABELS "abi" SKIP_RETURN_CODE 77 TIMEOUT 300)

# The two checks above on stand-in libraries: what docs/ABI.md allows passes, what it
# forbids fails (new function in a released node, moved node, unlisted or wildcard names,
# changed stable function), experimental functions stay out of the baseline.
add_test(NAME abi_check_selftest COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/abi_selftest.sh
  ${CMAKE_C_COMPILER})
set_tests_properties(abi_check_selftest PROPERTIES LABELS "abi" SKIP_RETURN_CODE 77
  TIMEOUT 600)

add_custom_target(zarena_abi_baseline
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/check_abi.sh --update $<TARGET_FILE:zarena>
    ${ZARENA_PUBLIC_HEADERS_DIR} ${ZARENA_ABI_BASELINE}
  DEPENDS zarena
  COMMENT "Regenerating ${ZARENA_ABI_BASELINE}"
  VERBATIM)

# The Go binding's dlopen table (go/dlopen.h): every function it loads is called through
# the loaded pointer, and is a symbol of the map.
add_test(NAME go_dlopen_table COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/check_dlopen_table.py
  ${PROJECT_SOURCE_DIR})
set_tests_properties(go_dlopen_table PROPERTIES LABELS "abi" TIMEOUT 60)
