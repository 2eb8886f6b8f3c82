/* The C half of the Go overflow allocator (overflow.go, overflow_export.go): a
 * zarena_overflow_allocator whose functions call the Go allocator through the exported
 * trampolines. Its ctx is a runtime/cgo.Handle, an integer: C keeps no Go pointer. */
#ifndef ZARENA_GO_OVERFLOW_HOOK_H
#define ZARENA_GO_OVERFLOW_HOOK_H

#include <stdint.h>
#include <zarena/zarena.h>

/* The allocator for the Go allocator behind `handle`; name is kept by the caller for the
 * duration of zarena_set_overflow_allocator (which copies it). */
zarena_overflow_allocator zarena_go_overflow_allocator(uintptr_t handle, const char* name);

#endif
