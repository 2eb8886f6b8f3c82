# Warnings for every target of this project; errors unless ZARENA_WERROR is OFF.
function(zarena_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra $<$<BOOL:${ZARENA_WERROR}>:-Werror>)
endfunction()
