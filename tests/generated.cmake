# The files generated from the tables in src/ (tools/gen) are what the tables give: fails
# when a committed copy differs; `cmake --build <build> --target zarena_generate` rewrites
# them.
add_test(NAME generated_files_in_sync COMMAND zarena_gen check ${PROJECT_SOURCE_DIR})
set_tests_properties(generated_files_in_sync PROPERTIES LABELS unit TIMEOUT 60)
