# Warnings are errors for every target of this project.
function(zarena_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror)
endfunction()
