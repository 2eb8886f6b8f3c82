/*
 * zarena_testing.h — hooks for testing programs and bindings without a GPU.
 *
 * Outside zarena's stable contract (zarena.h): what these functions do may change in a
 * minor version. Their symbols stay: each keeps the symbol version it shipped with
 * (zarena_debug_inject_overflow_fault: ZARENA_1, as in 1.0.0), so programs linked against
 * them keep loading. Thread rules and status conventions are zarena.h's. Not installed:
 * the library's suites and the bindings use it from the source tree (Go carries a copy).
 */
#ifndef ZARENA_ZARENA_TESTING_H
#define ZARENA_ZARENA_TESTING_H

#include "zarena.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fault injection for the overflow path of a HOST-backend arena. After this call, the
 * fail_nth-th overflow allocation from now (1 = the next) fails as the backend would (0 =
 * never), and the delay_nth-th overflow allocation (1 = the next; 0 = every one) sleeps
 * delay_ns before it completes (delay_ns 0 = no delay). A call ends a delay in progress
 * (the sleeping allocation goes on at once): a test can set a long delay and end it when
 * what it waits for has happened, so that nothing depends on how long that takes.
 * Returns ZARENA_OK; ZARENA_E_INVALID_ARGUMENT (NULL a); ZARENA_E_UNSUPPORTED on an
 * arena whose backend is not HOST. Thread-safe. */
ZARENA_API zarena_status zarena_debug_inject_overflow_fault(zarena* a, uint64_t fail_nth,
                                                            uint64_t delay_nth, uint64_t delay_ns);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ZARENA_ZARENA_TESTING_H */
