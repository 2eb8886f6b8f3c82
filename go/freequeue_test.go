package zarena

import (
	"errors"
	"math/rand"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// One op of a replayed workload: alloc (size > 0) into slot, or free slot.
type traceOp struct {
	alloc bool
	slot  int
	size  uint64
}

func randomTrace(seed int64, n int) []traceOp {
	rng := rand.New(rand.NewSource(seed))
	var ops []traceOp
	live := map[int]bool{}
	next := 0
	for len(ops) < n {
		if len(live) > 0 && rng.Intn(3) == 0 {
			for s := range live { // any live slot
				ops = append(ops, traceOp{slot: s})
				delete(live, s)
				break
			}
			continue
		}
		ops = append(ops, traceOp{alloc: true, slot: next, size: uint64(1 + rng.Intn(64*kiB))})
		live[next] = true
		next++
	}
	return ops
}

// The queued path hands out exactly the pointers the synchronous path does: every
// queued free is applied before the allocation that follows it.
func TestQueuedFreesAppliedBeforeTheNextAlloc(t *testing.T) {
	// One OS thread: the library lays blocks out per thread (docs/CONCURRENCY.md).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ops := randomTrace(1, 4000)
	run := func(sync bool) ([]DevicePtr, Stats) {
		a := newHost(t, Config{CapacityBytes: 64 * miB})
		ptrs := map[int]DevicePtr{}
		var got []DevicePtr
		for i, op := range ops {
			if op.alloc {
				p := mustAlloc(t, a, op.size)
				ptrs[op.slot] = p
				got = append(got, p)
				continue
			}
			var err error
			if sync {
				err = a.FreeNow(ptrs[op.slot])
			} else {
				err = a.Free(ptrs[op.slot])
			}
			if err != nil {
				t.Fatalf("op %d: free: %v", i, err)
			}
			if i%997 == 0 {
				if err := a.Reset(); err != nil {
					t.Fatal(err)
				}
				ptrs = map[int]DevicePtr{}
			}
		}
		return got, a.Stats()
	}
	queued, qs := run(false)
	synced, ss := run(true)
	if len(queued) != len(synced) {
		t.Fatalf("%d vs %d allocations", len(queued), len(synced))
	}
	// Offsets, not addresses: the two arenas have different bases.
	for i := range queued {
		if queued[i]-queued[0] != synced[i]-synced[0] {
			t.Fatalf("allocation %d: queued path at offset %#x, synchronous at %#x", i,
				queued[i]-queued[0], synced[i]-synced[0])
		}
	}
	if qs.Reuses != ss.Reuses || qs.HighWaterBytes != ss.HighWaterBytes ||
		qs.LiveAllocs != ss.LiveAllocs || qs.FreeListLen != ss.FreeListLen || qs.Reuses == 0 {
		t.Fatalf("stats differ:\nqueued %+v\nsync   %+v", qs, ss)
	}
}

// A Free makes no cgo call; the Alloc after it carries it (one batch of one free).
func TestFreeRidesOnTheNextAlloc(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 4 * miB})
	p := mustAlloc(t, a, 4*kiB)
	mustAlloc(t, a, 4*kiB) // p is not the top block: its reuse shows in stats
	_, before := a.q.counts()
	if err := a.Free(p); err != nil {
		t.Fatal(err)
	}
	if _, now := a.q.counts(); now != before {
		t.Fatal("Free crossed into C")
	}
	b, err := a.AllocBlock(4 * kiB)
	if err != nil {
		t.Fatal(err)
	}
	if b.Ptr != p || b.Flags&BlockReused == 0 {
		t.Fatalf("Alloc after Free: %+v, want the freed block %#x reused", b, p)
	}
	if _, now := a.q.counts(); now-before != 1 {
		t.Fatalf("%d batches applied, want 1", now-before)
	}
}

// Queued epoch-checked frees of blocks a reset reclaimed are dropped and counted.
func TestStaleQueuedFreesAfterResetDroppedAndCounted(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 4 * miB})
	var old []Block
	for i := 0; i < 5; i++ {
		b, err := a.AllocBlock(8 * kiB)
		if err != nil {
			t.Fatal(err)
		}
		old = append(old, b)
	}
	if err := a.Reset(); err != nil {
		t.Fatal(err)
	}
	// The new epoch hands out the same addresses again.
	fresh := make([]Block, len(old))
	for i := range fresh {
		b, err := a.AllocBlock(8 * kiB)
		if err != nil {
			t.Fatal(err)
		}
		fresh[i] = b
	}
	if fresh[0].Ptr != old[0].Ptr || fresh[0].Epoch == old[0].Epoch {
		t.Fatalf("address not handed out again: old %+v new %+v", old[0], fresh[0])
	}
	for _, b := range old { // late finalizers of the previous epoch
		if err := a.FreeBlock(b); err != nil {
			t.Fatal(err)
		}
	}
	s := a.Stats() // applies the queue
	if s.StaleFrees != uint64(len(old)) || s.LiveAllocs != uint64(len(fresh)) {
		t.Fatalf("stale %d live %d, want %d stale and the %d new blocks live", s.StaleFrees,
			s.LiveAllocs, len(old), len(fresh))
	}
	errs := a.FreeErrors()
	if len(errs) != len(old) || a.FreeErrorCount() != uint64(len(old)) {
		t.Fatalf("FreeErrors %v (count %d)", errs, a.FreeErrorCount())
	}
	for i, err := range errs {
		var fe *FreeError
		if !errors.As(err, &fe) || !errors.Is(err, ErrStale) || fe.Ptr != old[i].Ptr ||
			fe.Epoch != old[i].Epoch {
			t.Fatalf("error %d: %v", i, err)
		}
	}
	if len(a.FreeErrors()) != 0 {
		t.Fatal("FreeErrors did not forget what it returned")
	}
	// The new blocks are intact: each can still be freed, checked.
	for _, b := range fresh {
		if err := a.FreeAtNow(b.Ptr, b.Epoch); err != nil {
			t.Fatalf("new block %#x: %v", b.Ptr, err)
		}
	}
}

// A double free through the queue is reported: counted by the library, kept, logged.
func TestQueuedDoubleFreeReported(t *testing.T) {
	rec := captureLogs(t, t.Name(), LevelWarn)
	a := newHost(t, Config{CapacityBytes: 4 * miB})
	p := mustAlloc(t, a, 4*kiB)
	mustAlloc(t, a, 4*kiB)
	for i := 0; i < 2; i++ {
		if err := a.Free(p); err != nil {
			t.Fatal(err)
		}
	}
	q := mustAlloc(t, a, 64*kiB) // applies both: the second is the double free
	if q == p {
		t.Fatal("a 64 KiB request reused a 4 KiB block")
	}
	if s := a.Stats(); s.InvalidFrees != 1 || s.LiveAllocs != 2 {
		t.Fatalf("stats %+v", s)
	}
	errs := a.FreeErrors()
	if len(errs) != 1 || !errors.Is(errs[0], ErrDoubleFree) || StatusOf(errs[0]) != StatusDoubleFree {
		t.Fatalf("FreeErrors = %v", errs)
	}
	r, ok := rec.find("go.free_failed")
	if !ok || r.Level != LevelWarn || !containsAll(r.Message, "double free", "queued free") {
		t.Fatalf("no go.free_failed record for the double free: %+v", r)
	}
}

// Tensors freed by finalizers, from 8 goroutines at once, with explicit frees mixed in:
// every block comes back, no free fails, and the frees travel in batches.
func TestFinalizerFreesFrom8Goroutines(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 256 * miB})
	type tensor struct {
		b Block
		_ [64]byte // a real tensor's header
	}
	var finalized atomic.Int64
	const goroutines, perG = 8, 2000
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < perG; i++ {
				b, err := a.AllocBlock(uint64(256 * (1 + (i+g)%16)))
				if err != nil {
					t.Error(err)
					return
				}
				if i%4 == 0 { // freed explicitly, at once
					if err := a.FreeBlock(b); err != nil {
						t.Error(err)
						return
					}
					continue
				}
				tn := &tensor{b: b}
				runtime.SetFinalizer(tn, func(tn *tensor) {
					if err := a.FreeBlock(tn.b); err != nil {
						t.Error(err)
					}
					finalized.Add(1)
				})
				if i%64 == 0 {
					runtime.GC()
				}
			}
		}(g)
	}
	wg.Wait()
	want := int64(goroutines * perG * 3 / 4)
	deadline := time.Now().Add(30 * time.Second)
	for finalized.Load() < want && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if got := finalized.Load(); got != want {
		t.Fatalf("%d of %d finalizers ran", got, want)
	}
	s := a.Stats()
	if s.LiveAllocs != 0 || s.InvalidFrees != 0 || s.StaleFrees != 0 || a.FreeErrorCount() != 0 {
		t.Fatalf("after every tensor was finalized: %+v, %d queued frees failed", s,
			a.FreeErrorCount())
	}
	frees, batches := a.q.counts()
	if frees != goroutines*perG || batches == 0 || batches >= frees {
		t.Fatalf("%d frees in %d batches: not batched", frees, batches)
	}
	t.Logf("%d frees applied in %d crossings", frees, batches)
}

// Free(p) happens before Reset() in the program: p is freed before the reset even when
// another goroutine's allocation took the batch holding it and has not crossed yet.
func TestResetWaitsForBatchesInFlight(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 64 * miB})
	for round := 0; round < 200; round++ {
		var wg sync.WaitGroup
		stop := make(chan struct{})
		// Allocators take whatever is queued with their allocation. They never use or
		// free their blocks (the reset reclaims them), so only this goroutine's frees
		// can fail.
		for g := 0; g < 3; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := a.Alloc(256); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		blocks := make([]Block, 16)
		for i := range blocks {
			b, err := a.AllocBlock(kiB)
			if err != nil {
				t.Fatal(err)
			}
			blocks[i] = b
		}
		for _, b := range blocks {
			_ = a.FreeBlock(b)
		}
		if err := a.Reset(); err != nil {
			t.Fatal(err)
		}
		close(stop)
		wg.Wait()
		if err := a.Flush(); err != nil {
			t.Fatal(err)
		}
		if n := a.FreeErrorCount(); n != 0 {
			// A free of this round applied after the reset: it went stale.
			t.Fatalf("round %d: %d frees applied after the reset they preceded: %v", round, n,
				a.FreeErrors())
		}
	}
}

func TestFreeAfterCloseAndCloseAppliesQueue(t *testing.T) {
	rec := captureLogs(t, t.Name(), LevelInfo)
	a := newHost(t, Config{CapacityBytes: 4 * miB})
	p := mustAlloc(t, a, kiB)
	if err := a.Free(p); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	d, ok := rec.find("arena.destroy")
	if !ok {
		t.Fatal("no arena.destroy record")
	}
	if live, _ := d.Field("live_allocs"); live != uint64(0) {
		t.Fatalf("the queued free was not applied before the destroy: live_allocs %v", live)
	}
	if err := a.Free(p); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Free after Close: %v", err)
	}
}

// A full queue is applied at once, without waiting for the next Alloc.
func TestFullQueueAppliedAtOnce(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 64 * miB})
	ptrs := make([]DevicePtr, freeQueueCap+1)
	for i := range ptrs {
		ptrs[i] = mustAlloc(t, a, 256)
	}
	_, before := a.q.counts()
	for _, p := range ptrs[:freeQueueCap] {
		if err := a.Free(p); err != nil {
			t.Fatal(err)
		}
	}
	if _, now := a.q.counts(); now != before+1 {
		t.Fatalf("a full queue (%d frees) was not applied", freeQueueCap)
	}
	if err := a.Free(ptrs[freeQueueCap]); err != nil {
		t.Fatal(err)
	}
	if _, now := a.q.counts(); now != before+1 {
		t.Fatal("one more free crossed")
	}
	if s := a.Stats(); s.LiveAllocs != 0 {
		t.Fatalf("live %d", s.LiveAllocs)
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
