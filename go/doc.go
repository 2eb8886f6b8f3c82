// Package zarena is the Go binding of zarena, a GPU memory arena with a C ABI.
//
// An Arena reserves one region (CUDA device memory, or host memory with BackendHost)
// and hands out aligned blocks of it. A training loop uploads its weights, marks the
// step boundary, and resets the arena after every step:
//
//	a, err := zarena.New(zarena.Config{CapacityBytes: 8 << 30})
//	if err != nil { ... }
//	defer a.Close()
//	weights, _ := a.Alloc(n)
//	a.MarkStepBoundary()
//	for step := range steps {
//		err := a.Step(func() error { ... a.Alloc / a.Free ... })
//	}
//
// A DevicePtr is an address in the arena's region, not Go memory: the Go garbage
// collector does not see it, and it is invalid after the Free, the Reset that reclaims
// it, or Close.
//
// Every call into the library is a real cgo call, so a C call that blocks (an overflow
// allocation stuck in the driver) holds one OS thread while the other goroutines and the
// garbage collector keep running. The binding crosses once per tensor: Free only queues
// the block, and the next allocation applies the queued frees before its own work, in the
// same cgo call; no Go pointer is kept by C. The queue is sharded, so goroutines on
// different processors neither share a lock nor wait for each other; whole-arena calls
// (Reset, Stats, Close, ...) apply every queued free first.
//
// Lanes: a worker goroutine takes a Lane (l := a.Lane()) and allocates and frees through
// it. A Lane keeps the blocks it handed out when they are freed, live in the library, and
// hands them out again for requests of the same rounded size without a cgo call, so a
// steady loop on a Lane crosses into C only for new sizes; misuse of those blocks (a double
// free, an epoch of another step) is an error at the call, and the library's stats are
// exact whenever it is asked (every whole-arena call gives the kept blocks back first). A
// goroutine without a Lane crosses on every allocation, from a shard its stack address
// names, and nothing is kept for it. Step plans come first: while they follow the requests
// (learning a step, or serving one) nothing is kept (see Lane).
//
// Step plans (on by default; FlagNoPlan or ZARENA_PLAN=0 turn them off): when a step
// repeats, the library lays it out once and the binding serves the step's planned
// allocations and their frees itself, from C memory the library publishes
// (zarena/zarena_plan.h), with no cgo call per tensor; the step boundary (StepBegin, Reset,
// Step) is the one crossing a step. Requests the plan does not expect, pins and checked
// frees cross as without a plan. Blocks served so carry BlockPlanned.
//
// One stream = one Lane = one slot = one plan: the Arena's plan follows one sequence of
// requests, so goroutines sharing an arena interleave on it. A worker goroutine that takes
// l, err := a.NewLane() (and l.Close() at the end) gets a lane of the library of its own
// (zarena/zarena_lane.h, experimental): its own region slot and its own plan, its step
// marked by l.StepBegin() (and every Reset), served from the Lane's own plan memory with no
// cgo call; the plans of several Lanes share the region without overlapping.
//
// Frees: Free(p) and FreeBlock(b) are queued (FreeBlock checks b's epoch when applied:
// the free for finalizers, which may run after a reset); FreeNow(p, epoch) frees at once
// and returns the outcome. With poison on, queued frees are applied, and filled, before
// Free returns.
//
// Diagnostics (configuration at create, the reset-cadence warning, the first-overflow
// verdict) go to stderr until SetLogger routes them to Go (SlogLogger adapts an
// slog.Handler). Go loggers are called on one goroutine, in emission order, never inside
// a binding call; a call that fails returns only after the records emitted so far reached
// the logger, so log.Fatal(err) keeps the diagnosis. FlushLogs waits for them at any time.
// With FlagDiagnoseSync an allocation that overflows also returns only after its
// diagnosis reached the logger (no FlushLogs needed, none of other arenas' records waited
// for by the library).
//
// Overflow route: SetOverflowPolicy changes the policy at run time (live overflow blocks
// keep the route that made them); SetOverflowAllocator routes overflow to the engine's own
// pool (an OverflowAllocator, called through exported functions with a cgo.Handle as the
// library's context).
//
// Errors are *Error values that unwrap to one sentinel per C status (ErrOutOfMemory,
// ErrStale, ...); a call on a closed arena is ErrClosed. Test helpers that a program must
// not ship (fault injection) are in package zarenatest.
//
// Linking: by default cgo finds the library with pkg-config (package "zarena"); set
// PKG_CONFIG_PATH to the directory holding zarena.pc. The build tag zarena_static links
// libzarena.a instead (zarena-static.pc), and zarena_dlopen builds without the library and
// loads it at run time (Available). Without cgo the package does not compile. The
// repository's scripts/go-test.sh generates the .pc files for a build tree.
package zarena
