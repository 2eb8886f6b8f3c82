// main() of the unit suites: gtest_main's, after tests/isolate.h's isolation (the caller's
// ZARENA_* variables removed, files capped at 100 MiB).
#include <gtest/gtest.h>

#include "isolate.h"

int main(int argc, char** argv) {
  zarena_test::isolate_process();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
