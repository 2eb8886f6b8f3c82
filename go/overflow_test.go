package zarena

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// poolAllocator is an engine's own pool as an OverflowAllocator: a second host arena
// (as ztensor's MemPool would be), counting what it hands out and gets back.
type poolAllocator struct {
	pool          *Arena
	mu            sync.Mutex
	live          map[DevicePtr]uint64
	allocs, frees atomic.Uint64
	wrongFrees    atomic.Uint64
	failWith      atomic.Pointer[error] // the error to return; nil: none
}

func newPoolAllocator(t *testing.T) *poolAllocator {
	return &poolAllocator{
		pool: newHost(t, Config{Name: t.Name() + "-pool", CapacityBytes: 4 * miB, OverflowPolicy: OverflowRefuse}),
		live: map[DevicePtr]uint64{},
	}
}

func (p *poolAllocator) AllocOverflow(bytes, alignment uint64, stream uintptr) (DevicePtr, error) {
	if err := p.failWith.Load(); err != nil {
		return 0, *err
	}
	b, err := p.pool.AllocBlock(bytes)
	if err != nil {
		return 0, err
	}
	p.mu.Lock()
	p.live[b.Ptr] = bytes
	p.mu.Unlock()
	p.allocs.Add(1)
	return b.Ptr, nil
}

func (p *poolAllocator) FreeOverflow(ptr DevicePtr, bytes uint64, stream uintptr) {
	p.mu.Lock()
	n, ok := p.live[ptr]
	delete(p.live, ptr)
	p.mu.Unlock()
	if !ok || n != bytes {
		p.wrongFrees.Add(1)
		return
	}
	if err := p.pool.FreeNow(ptr, AnyEpoch); err != nil {
		p.wrongFrees.Add(1)
	}
	p.frees.Add(1)
}

func (p *poolAllocator) owns(ptr DevicePtr) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.live[ptr]
	return ok
}

func (p *poolAllocator) liveCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.live)
}

const routeBlock = 16 * kiB

// newRouteArena is a 64 KiB host arena whose region is full: every next routeBlock
// overflows.
func newRouteArena(t *testing.T, policy OverflowPolicy, flags Flags) *Arena {
	t.Helper()
	a := newHostShards(t, Config{CapacityBytes: 64 * kiB, OverflowPolicy: policy,
		OverflowLimitBytes: OverflowUnlimited, Flags: flags}, 1)
	mustAllocBlocks(t, a, 4, routeBlock)
	return a
}

func TestSetOverflowPolicyKeepsEachBlocksRoute(t *testing.T) {
	rec := captureLogs(t, t.Name(), LevelInfo)
	a := newRouteArena(t, OverflowSync, 0)
	pool := newPoolAllocator(t)
	if got := a.OverflowPolicy(); got != OverflowSync {
		t.Fatalf("OverflowPolicy() = %v, want sync", got)
	}
	sync1 := mustAllocBlocks(t, a, 1, routeBlock)[0]
	if err := a.SetOverflowPolicy(OverflowAsync); err != nil {
		t.Fatal(err)
	}
	async1 := mustAllocBlocks(t, a, 1, routeBlock)[0]
	if err := a.SetOverflowAllocator(pool, "engine.MemPool"); err != nil {
		t.Fatal(err)
	}
	if got := a.OverflowPolicy(); got != OverflowCustom || got.String() != "custom" {
		t.Fatalf("OverflowPolicy() = %v after SetOverflowAllocator", got)
	}
	custom1 := mustAllocBlocks(t, a, 1, routeBlock)[0]
	if err := a.SetOverflowPolicy(OverflowRefuse); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Alloc(routeBlock); !errors.Is(err, ErrOutOfMemory) {
		t.Fatalf("Alloc under refuse: %v", err)
	}
	for _, b := range []Block{sync1, async1, custom1} {
		if b.Flags&BlockOverflow == 0 {
			t.Fatalf("block %+v is not an overflow block", b)
		}
	}
	if pool.owns(sync1.Ptr) || pool.owns(async1.Ptr) || !pool.owns(custom1.Ptr) || pool.allocs.Load() != 1 {
		t.Fatalf("the pool made the wrong blocks: allocs %d", pool.allocs.Load())
	}
	// Freed under REFUSE, each goes back by its route: the pool's to the pool.
	for _, b := range []Block{sync1, async1} {
		if err := a.FreeNow(b.Ptr, b.Epoch); err != nil {
			t.Fatal(err)
		}
	}
	if pool.frees.Load() != 0 {
		t.Fatalf("the pool got back %d blocks it did not make", pool.frees.Load())
	}
	if err := a.FreeNow(custom1.Ptr, custom1.Epoch); err != nil {
		t.Fatal(err)
	}
	if pool.frees.Load() != 1 || pool.wrongFrees.Load() != 0 || pool.liveCount() != 0 {
		t.Fatalf("pool: frees %d, wrong %d, live %d", pool.frees.Load(), pool.wrongFrees.Load(), pool.liveCount())
	}
	if s := mustStats(t, a); s.OverflowLiveBlocks != 0 || s.OverflowAllocs != 3 {
		t.Fatalf("stats: %d live overflow blocks, %d overflow allocs", s.OverflowLiveBlocks, s.OverflowAllocs)
	}
	if n := rec.count("arena.overflow_policy"); n != 3 {
		t.Fatalf("%d arena.overflow_policy records, want 3", n)
	}
}

func TestOverflowChangesRefusedChangeNothing(t *testing.T) {
	a := newRouteArena(t, OverflowSync, 0)
	pool := newPoolAllocator(t)
	for _, bad := range []OverflowPolicy{-1, 5, 99} {
		err := a.SetOverflowPolicy(bad)
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "is no overflow policy") {
			t.Fatalf("SetOverflowPolicy(%d): %v", bad, err)
		}
	}
	if err := a.SetOverflowPolicy(OverflowCustom); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("SetOverflowPolicy(custom) without an allocator: %v", err)
	}
	if got := a.OverflowPolicy(); got != OverflowSync {
		t.Fatalf("policy %v after refused changes", got)
	}
	if err := a.SetOverflowAllocator(pool, ""); err != nil {
		t.Fatal(err)
	}
	p := mustAlloc(t, a, routeBlock)
	other := newPoolAllocator(t)
	err := a.SetOverflowAllocator(other, "other")
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "1 overflow block(s) of the installed allocator 'custom'") {
		t.Fatalf("replacing with a block live: %v", err)
	}
	if err := a.SetOverflowAllocator(nil, ""); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("removing with a block live: %v", err)
	}
	q := mustAlloc(t, a, routeBlock)
	if !pool.owns(q) || other.allocs.Load() != 0 {
		t.Fatal("a refused replacement changed the allocator")
	}
	// Queued frees are applied before the change: once both are freed it goes.
	if err := a.Free(p); err != nil {
		t.Fatal(err)
	}
	if err := a.Free(q); err != nil {
		t.Fatal(err)
	}
	if err := a.SetOverflowAllocator(nil, ""); err != nil {
		t.Fatalf("removing once its blocks are back: %v", err)
	}
	if got := a.OverflowPolicy(); got != OverflowSync {
		t.Fatalf("policy %v after the allocator went, want sync (no stream)", got)
	}
	if pool.liveCount() != 0 || pool.wrongFrees.Load() != 0 {
		t.Fatalf("pool: %d live, %d wrong frees", pool.liveCount(), pool.wrongFrees.Load())
	}
}

func TestOverflowAllocatorFailureAndClose(t *testing.T) {
	pool := newPoolAllocator(t)
	a := newRouteArena(t, OverflowSync, 0)
	if err := a.SetOverflowAllocator(pool, "engine.MemPool"); err != nil {
		t.Fatal(err)
	}
	drained := errors.New("the pool is drained")
	pool.failWith.Store(&drained)
	_, err := a.Alloc(routeBlock)
	if !errors.Is(err, ErrBackend) || !strings.Contains(err.Error(), "the overflow allocator 'engine.MemPool'") {
		t.Fatalf("Alloc with a failing allocator: %v", err)
	}
	pool.failWith.Store(&ErrOutOfMemory)
	if _, err := a.Alloc(routeBlock); !errors.Is(err, ErrOutOfMemory) {
		t.Fatalf("Alloc with an allocator out of memory: %v", err)
	}
	pool.failWith.Store(nil)
	mustAlloc(t, a, routeBlock)
	mustAlloc(t, a, routeBlock)
	if err := a.Reset(); err != nil {
		t.Fatal(err)
	}
	if pool.frees.Load() != 2 {
		t.Fatalf("reset gave %d blocks back to the pool, want 2", pool.frees.Load())
	}
	mustAllocBlocks(t, a, 4, routeBlock)
	mustAlloc(t, a, routeBlock)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if pool.allocs.Load() != 3 || pool.frees.Load() != 3 || pool.liveCount() != 0 || pool.wrongFrees.Load() != 0 {
		t.Fatalf("pool after Close: allocs %d frees %d live %d wrong %d",
			pool.allocs.Load(), pool.frees.Load(), pool.liveCount(), pool.wrongFrees.Load())
	}
}

// Policy changes while goroutines allocate and free overflow blocks (run with -race).
func TestOverflowPolicyChangesRaceAllocations(t *testing.T) {
	pool := newPoolAllocator(t)
	a := newRouteArena(t, OverflowSync, 0)
	if err := a.SetOverflowAllocator(pool, ""); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var failures atomic.Uint64
	stop := make(chan struct{})
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				b, err := a.AllocBlock(routeBlock)
				if err != nil {
					continue // refused while the policy was REFUSE
				}
				if err := a.FreeBlock(b); err != nil {
					failures.Add(1)
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		order := []OverflowPolicy{OverflowAsync, OverflowCustom, OverflowRefuse, OverflowSync}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := a.SetOverflowPolicy(order[i%len(order)]); err != nil {
				failures.Add(1)
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-done
	if err := a.Reset(); err != nil { // applies the queued frees
		t.Fatal(err)
	}
	if failures.Load() != 0 {
		t.Fatalf("%d failures", failures.Load())
	}
	if pool.allocs.Load() != pool.frees.Load() || pool.wrongFrees.Load() != 0 {
		t.Fatalf("pool: allocs %d frees %d wrong %d", pool.allocs.Load(), pool.frees.Load(), pool.wrongFrees.Load())
	}
}

func TestDiagnoseSyncRecordIsInBeforeAllocReturns(t *testing.T) {
	rec := captureLogs(t, t.Name(), LevelInfo)
	a := newRouteArena(t, OverflowSync, FlagDiagnoseSync)
	if _, err := a.Alloc(routeBlock); err != nil {
		t.Fatal(err)
	}
	if n := rec.arrived("arena.first_overflow"); n != 1 {
		t.Fatalf("%d arena.first_overflow records when Alloc returned, want 1", n)
	}
	// AllocBlock and AllocBatch, in later epochs.
	if err := a.Reset(); err != nil {
		t.Fatal(err)
	}
	mustAllocBlocks(t, a, 5, routeBlock)
	if n := rec.arrived("arena.first_overflow"); n != 2 {
		t.Fatalf("%d records after AllocBlock overflowed, want 2", n)
	}
	if err := a.Reset(); err != nil {
		t.Fatal(err)
	}
	blocks := make([]Block, 5)
	if err := a.AllocBatch([]uint64{routeBlock, routeBlock, routeBlock, routeBlock, routeBlock}, 0, blocks); err != nil {
		t.Fatal(err)
	}
	if n := rec.arrived("arena.first_overflow"); n != 3 {
		t.Fatalf("%d records after AllocBatch overflowed, want 3", n)
	}
}

func TestDiagnoseSyncOffKeepsTheReporter(t *testing.T) {
	rec := captureLogs(t, t.Name(), LevelInfo)
	a := newRouteArena(t, OverflowSync, 0)
	if _, err := a.Alloc(routeBlock); err != nil {
		t.Fatal(err)
	}
	if n := rec.count("arena.first_overflow"); n != 1 { // after FlushLogs
		t.Fatalf("%d arena.first_overflow records, want 1", n)
	}
}
