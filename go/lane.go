//go:build cgo

package zarena

// Lane is one goroutine's own way into an arena: one stream, one worker, one Lane. The Alloc
// and Free of a Lane use a shard of the free queue of their own (freequeue.go), chosen when
// the Lane is made, instead of the shard an address in the caller's stack names. Lanes made
// one after another get different shards until the shards run out (there are at least
// twice GOMAXPROCS at New), so worker goroutines that each hold a Lane never find their
// shard held by another, where goroutines whose stacks happen to name the same shard do
// (the benchmarks' shared-homes counts them).
//
// A Lane keeps the blocks it hands out when they are freed (lane_cache.go): live in the
// library, and handed out again to the shard's next request of the same rounded size
// without a cgo call, so a steady loop of Alloc and Free on a Lane makes no crossing at
// all. Misuse of such a block is answered at the call (ErrDoubleFree, ErrStale as a
// *FreeError); the library's stats are exact whenever it is asked (Stats, Reset and every
// whole-arena call give the kept blocks back first).
//
// Step plans come first: they are on by default, and while they follow the requests (the
// library learns a step, or a plan serves it: then the planned path makes no crossing
// either) a Lane keeps nothing, since a kept block would hide requests from the learner
// and the plan. A Lane keeps blocks with FlagNoPlan (ZARENA_PLAN=0), and with plans on
// whenever they learn and serve nothing: in a program that marks no steps (the learner
// gives up after 64k allocations before the first boundary), during a step too long to
// learn, while learning pauses after steps that do not repeat. The library says which
// (zarena_kept_report_add); the binding asks at every step boundary and floor change, and
// every 1024 crossings of a shard while refused. Nothing is kept with a trace,
// FlagDiagnoseSync or poison on.
//
// A goroutine without a Lane calls the Arena: its shard is the one its stack address names
// (shared now and then with another goroutine's), its Alloc crosses into the library every
// time (with the frees queued on its shard), and nothing is kept for it; a block it frees is
// queued for the library, also one a Lane handed out.
//
// Everything else is the Arena's: the plan, ordering, Close, errors. A Lane may be used from
// any number of goroutines (they then share its shard and its kept blocks); it is a value,
// cheap to copy, valid as long as its Arena.
type Lane struct {
	a     *Arena
	frame uintptr // an address that home maps to the Lane's shard
}

// Lane returns a new Lane of a.
func (a *Arena) Lane() Lane {
	if a.keepOK && a.kept.tab.Load() == nil { // the index of the blocks Lanes hand out
		a.kept.wantGrow.Store(true)
		a.growKept()
	}
	i := uintptr(a.lanes.Add(1)-1) & uintptr(a.mask)
	// home(i << 11) is i: no higher bits to fold in below len(shards) buckets.
	return Lane{a: a, frame: i << 11}
}

// Alloc is Arena.Alloc on the Lane's shard, served from a block the shard keeps when one of
// the size is there (no cgo call).
func (l Lane) Alloc(n uint64) (DevicePtr, error) { return l.a.allocKept(l.frame, n) }

// AllocBlock is Arena.AllocBlock on the Lane's shard, served like Alloc (a kept block comes
// back with BlockReused).
func (l Lane) AllocBlock(n uint64) (Block, error) {
	return l.a.allocBlockKept(l.frame, n, "AllocBlock")
}

// AllocTagged is Arena.AllocTagged on the Lane's shard (tag 0: AllocBlock; tagged blocks
// are never kept).
func (l Lane) AllocTagged(n uint64, tag Tag) (Block, error) {
	if tag == 0 {
		return l.a.allocBlockKept(l.frame, n, "AllocTagged")
	}
	return l.a.allocBlock(l.frame, n, tag, "AllocTagged")
}

// Free is Arena.Free on the Lane's shard, which keeps the block when the Lane handed it
// out (see Lane). Its error is ErrClosed, or a *FreeError at once for a free the binding
// can judge (a block kept already: ErrDoubleFree).
func (l Lane) Free(p DevicePtr) error { return l.a.freeKept(l.frame, p, AnyEpoch) }

// FreeBlock is Free checked against b.Epoch (a tracked block of another epoch: ErrStale at
// once).
func (l Lane) FreeBlock(b Block) error { return l.a.freeKept(l.frame, b.Ptr, b.Epoch) }

// Arena is the Lane's arena.
func (l Lane) Arena() *Arena { return l.a }
