//go:build cgo && !(gc && go1.23 && !go1.24 && amd64 && !zarena_portable)

package zarena

import (
	"math"
	"sync"
	"sync/atomic"
)

// The planned path without runtime assumptions (runtime_fast.go lists them and where they
// were verified): built for every other Go version, architecture and compiler, and with
// the zarena_portable build tag. Goroutines in the planned path hold the arena's gate for
// reading; planWait takes it for writing, which waits for every reader that came before
// it, and the readers after it see the nil the caller stored. Release stores are
// sync/atomic's (sequentially consistent, so at least release). Two locked instructions
// more per planned call, and goroutines serving one arena's plan share the gate's cache
// line; nothing else changes.

// runtimeAssumptions names the planned path's build (tests and benchmarks report it).
const runtimeAssumptions = "portable: read-write gate, atomic stores"

// planGate is the per-arena way into the planned path.
type planGate struct{ mu sync.RWMutex }

// noP is planEnter's answer: no P id, so the served counts add to their shared counter.
const noP = math.MaxInt

func (a *Arena) planEnter() int {
	a.gate.mu.RLock()
	return noP
}

func (a *Arena) planLeave() { a.gate.mu.RUnlock() }

// planWait returns once no goroutine that entered before it is still in the planned path
// (the caller stored nil in a.plan first).
func (a *Arena) planWait() {
	a.gate.mu.Lock()
	a.gate.mu.Unlock()
}

// storeRel64 and storeRel32 store with (at least) release ordering.
func storeRel64(p *uint64, v uint64) { atomic.StoreUint64(p, v) }
func storeRel32(p *uint32, v uint32) { atomic.StoreUint32(p, v) }
