// main() of the gpu-labelled suites: as gtest_main, except that a run in which every test
// skipped (no CUDA device, or fewer devices than a test needs) exits 77, which CTest
// reports as "Skipped" (SKIP_RETURN_CODE) rather than "Passed". A run with a failure
// still fails; a run where some tests passed still passes. Isolated as every suite is
// (tests/isolate.h).
#include <gtest/gtest.h>

#include "isolate.h"

int main(int argc, char** argv) {
  zarena_test::isolate_process();
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  const ::testing::UnitTest& u = *::testing::UnitTest::GetInstance();
  if (rc == 0 && u.successful_test_count() == 0 && u.skipped_test_count() > 0) return 77;
  return rc;
}
