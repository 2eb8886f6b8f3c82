//go:build cgo && gc && go1.23 && !go1.24 && amd64 && !zarena_portable

package zarena

import (
	"runtime"
	_ "unsafe" // go:linkname
)

// The planned path's assumptions about the Go runtime and the machine (plan.go). Each was
// verified on Go 1.23 (the gc toolchain) on amd64 only, hence this file's build constraint;
// any other Go version, architecture or compiler, and the zarena_portable build tag (which
// scripts/go-test.sh uses to run the plan tests through it), builds runtime_portable.go
// instead: slower, and it assumes nothing beyond the Go memory model.
//
//  1. runtime.procPin and runtime.procUnpin reached by go:linkname: sync.Pool's own pinning,
//     kept reachable by the runtime (go.dev/issue/67401). Pinned, a goroutine is not
//     preempted and its P runs nothing else; between the two it must not block, yield or
//     call C.
//  2. runtime.ReadMemStats stops the world: when it returns, every P has passed a safe
//     point, so no goroutine is still between a procPin and its procUnpin from before the
//     call. That makes it a barrier for planWait.
//  3. A plain store of a word is a release store: amd64 is TSO (C's __atomic_store_n with
//     __ATOMIC_RELEASE is a plain move there) and gc keeps stores to memory in program
//     order; sync/atomic's stores add a locked exchange (a full barrier) that the protocol
//     does not ask for, at about a tenth of a planned alloc+free pair each. The addresses
//     are C memory, which the race detector does not watch. (kept_store_plain.go relies on
//     the same for the words of kept blocks, and is fenced alike, and off under -race.)

// runtimeAssumptions names the planned path's build (tests and benchmarks report it).
const runtimeAssumptions = "fast: procPin, stop-the-world barrier, plain release stores (go1.23/amd64)"

// planGate is the per-arena state of the way into the planned path: none here.
type planGate struct{}

// planEnter pins the goroutine to its P and returns the P's id: from here to planLeave it
// may use the view it loads (it must not block, yield or call C).
func (a *Arena) planEnter() int { return procPin() }

func (a *Arena) planLeave() { procUnpin() }

// planWait returns once no goroutine that entered before it is still in the planned path
// (the caller stored nil in a.plan first): a stop of the world waits for every P.
func (a *Arena) planWait() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
}

// storeRel64 and storeRel32 store with release ordering (zarena_plan.h's "atomic store,
// release"): a plain store (assumption 3).
func storeRel64(p *uint64, v uint64) { *p = v }
func storeRel32(p *uint32, v uint32) { *p = v }

//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()
