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
	"unsafe"
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
		a := newHostShards(t, Config{CapacityBytes: 64 * miB}, 1)
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
				err = a.FreeNow(ptrs[op.slot], AnyEpoch)
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
		return got, mustStats(t, a)
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
	a := newHostShards(t, Config{CapacityBytes: 4 * miB}, 1)
	p := mustAlloc(t, a, 4*kiB)
	mustAlloc(t, a, 4*kiB) // p is not the top block: its reuse shows in stats
	_, before := a.queueCounts()
	if err := a.Free(p); err != nil {
		t.Fatal(err)
	}
	if _, now := a.queueCounts(); now != before {
		t.Fatal("Free crossed into C")
	}
	mustReuseFreed(t, a, p, before, "Alloc after Free", a.AllocBlock)
}

// Queued epoch-checked frees of blocks a reset reclaimed are dropped and counted.
func TestStaleQueuedFreesAfterResetDroppedAndCounted(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 4 * miB})
	old := mustAllocBlocks(t, a, 5, 8*kiB)
	if err := a.Reset(); err != nil {
		t.Fatal(err)
	}
	fresh := mustAllocBlocks(t, a, 5, 8*kiB) // the new epoch hands out the same addresses
	if fresh[0].Ptr != old[0].Ptr || fresh[0].Epoch == old[0].Epoch {
		t.Fatalf("address not handed out again: old %+v new %+v", old[0], fresh[0])
	}
	for _, b := range old { // late finalizers of the previous epoch
		if err := a.FreeBlock(b); err != nil {
			t.Fatal(err)
		}
	}
	s := mustStats(t, a) // applies the queue
	if s.StaleFrees != uint64(len(old)) || s.LiveAllocs != uint64(len(fresh)) {
		t.Fatalf("stale %d live %d, want %d stale and the %d new blocks live", s.StaleFrees,
			s.LiveAllocs, len(old), len(fresh))
	}
	errs := a.FreeErrors()
	if len(errs) != len(old) {
		t.Fatalf("FreeErrors %v", errs)
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
		if err := a.FreeNow(b.Ptr, b.Epoch); err != nil {
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
	if s := mustStats(t, a); s.InvalidFrees != 1 || s.LiveAllocs != 2 {
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
	if r.ArenaID != a.ID() || r.Handle() != a {
		t.Fatalf("go.free_failed names arena %d (%p), want %d (%p)", r.ArenaID, r.Handle(), a.ID(), a)
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
	s := mustStats(t, a)
	if s.LiveAllocs != 0 || s.InvalidFrees != 0 || s.StaleFrees != 0 || len(a.FreeErrors()) != 0 {
		t.Fatalf("after every tensor was finalized: %+v, queued frees failed: %v", s,
			a.FreeErrors())
	}
	frees, batches := a.queueCounts()
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
		blocks := mustAllocBlocks(t, a, 16, kiB)
		for _, b := range blocks {
			_ = a.FreeBlock(b)
		}
		if err := a.Reset(); err != nil {
			t.Fatal(err)
		}
		close(stop)
		wg.Wait()
		if errs := a.FreeErrors(); len(errs) != 0 {
			// A free of this round applied after the reset: it went stale.
			t.Fatalf("round %d: %d frees applied after the reset they preceded: %v", round,
				len(errs), errs)
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
	if err := a.Free(p); !errors.Is(err, ErrClosed) {
		t.Fatalf("Free after Close: %v", err)
	}
}

// A full queue is applied at once, without waiting for the next Alloc.
func TestFullQueueAppliedAtOnce(t *testing.T) {
	a := newHostShards(t, Config{CapacityBytes: 64 * miB}, 1)
	ptrs := make([]DevicePtr, freeQueueCap+1)
	for i := range ptrs {
		ptrs[i] = mustAlloc(t, a, 256)
	}
	_, before := a.queueCounts()
	for _, p := range ptrs[:freeQueueCap] {
		if err := a.Free(p); err != nil {
			t.Fatal(err)
		}
	}
	if _, now := a.queueCounts(); now != before+1 {
		t.Fatalf("a full queue (%d frees) was not applied", freeQueueCap)
	}
	if err := a.Free(ptrs[freeQueueCap]); err != nil {
		t.Fatal(err)
	}
	if _, now := a.queueCounts(); now != before+1 {
		t.Fatal("one more free crossed")
	}
	if s := mustStats(t, a); s.LiveAllocs != 0 {
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

// queueOn queues a free on shard i: the address i 2 KiB buckets above 0 names shard i
// (home folds in nothing from so low an address).
func queueOn(a *Arena, i int, p DevicePtr, epoch uint64) error {
	if a.home(uintptr(i)<<11) != uint32(i) {
		panic("queueOn: home changed")
	}
	return a.queueFree(uintptr(i)<<11, p, epoch, false)
}

func TestShardsAreAPowerOfTwoAtLeastTwiceGOMAXPROCS(t *testing.T) {
	for _, procs := range []int{1, 3, 4} {
		prev := runtime.GOMAXPROCS(procs)
		a := newHost(t, Config{CapacityBytes: miB})
		runtime.GOMAXPROCS(prev)
		n := len(a.shards)
		if n < 2*procs || n&(n-1) != 0 || int(a.mask) != n-1 {
			t.Errorf("GOMAXPROCS %d: %d shards (mask %#x)", procs, n, a.mask)
		}
		if sz := unsafe.Sizeof(a.shards[0]); sz%shardBytes != 0 {
			t.Errorf("a shard is %d bytes, not a multiple of %d", sz, shardBytes)
		}
	}
}

// Frees queued on every shard are all applied before a whole-arena call, and before a block
// call on that block (Pin after Free is a double free, whichever shard holds the Free).
func TestEveryShardIsAppliedBeforeWholeArenaAndBlockCalls(t *testing.T) {
	a := newHostShards(t, Config{CapacityBytes: 4 * miB}, 8)
	blocks := mustAllocBlocks(t, a, 16, kiB)
	mustAlloc(t, a, kiB) // the top: the frees below are holes, not a lower top
	for i, b := range blocks[:8] {
		if err := queueOn(a, i, b.Ptr, b.Epoch); err != nil {
			t.Fatal(err)
		}
	}
	if queued, batches := a.queueCounts(); queued != 8 || batches != 0 {
		t.Fatalf("%d queued, %d applied", queued, batches)
	}
	s := mustStats(t, a)
	if s.LiveAllocs != 16-8+1 || s.FreeListBytes != 8*kiB {
		t.Fatalf("Stats did not see the frees of every shard: %+v", s)
	}
	if _, batches := a.queueCounts(); batches != 8 {
		t.Fatalf("%d shards applied, want 8", batches)
	}
	for i, b := range blocks[8:] {
		if err := queueOn(a, 7-i, b.Ptr, AnyEpoch); err != nil {
			t.Fatal(err)
		}
		if err := a.Pin(b.Ptr); !errors.Is(err, ErrDoubleFree) {
			t.Fatalf("Pin after a free queued on shard %d: %v, want ErrDoubleFree", 7-i, err)
		}
		if err := queueOn(a, i, b.Ptr, AnyEpoch); err != nil { // a double free, queued
			t.Fatal(err)
		}
		if err := a.FreeNow(b.Ptr, AnyEpoch); !errors.Is(err, ErrDoubleFree) {
			t.Fatalf("FreeNow after a free queued on shard %d: %v, want ErrDoubleFree", i, err)
		}
	}
	errs := a.FreeErrors()
	if len(errs) != 8 {
		t.Fatalf("FreeErrors: %v, want the 8 queued double frees", errs)
	}
	for _, err := range errs {
		if !errors.Is(err, ErrDoubleFree) {
			t.Fatalf("FreeErrors: %v", err)
		}
	}
}

// A goroutine whose shard is held (by a goroutine in its crossing, here the test) does not
// wait: it takes the next one.
func TestABusyShardIsPassedBy(t *testing.T) {
	a := newHostShards(t, Config{CapacityBytes: miB}, 2)
	p := mustAlloc(t, a, kiB)
	mustAlloc(t, a, kiB)
	for held := 0; held < 2; held++ {
		a.shards[held].mu.Lock()
		done := make(chan error)
		go func() { done <- a.Free(p) }()
		if err := <-done; err != nil { // would never return if Free waited for the held shard
			t.Fatal(err)
		}
		other := &a.shards[1-held]
		other.mu.Lock()
		n := other.n
		other.mu.Unlock()
		a.shards[held].mu.Unlock()
		if n != 1 {
			t.Fatalf("shard %d held: the free is not queued on shard %d", held, 1-held)
		}
		if err := a.FreeNow(p, AnyEpoch); !errors.Is(err, ErrDoubleFree) { // applies it
			t.Fatal(err)
		}
		if p, _ = a.Alloc(kiB); p == 0 {
			t.Fatal("no block")
		}
	}
}

// With poison on, a free is filled before Free returns, whatever the free: Free and
// FreeBlock, poison from the configuration or switched on later; frees queued before poison
// was switched on are applied then. No frees wait while poison is on; they do again after.
func TestPoisonIsNeverLate(t *testing.T) {
	const one = 0x3F800000 // 1.0f
	check := func(t *testing.T, a *Arena, free func(b Block) error) {
		t.Helper()
		b, err := a.AllocBlock(kiB)
		if err != nil {
			t.Fatal(err)
		}
		mustAlloc(t, a, kiB)
		w := unsafe.Slice((*uint32)(b.Ptr.Pointer()), b.Size/4)
		for i := range w {
			w[i] = one
		}
		queued, _ := a.queueCounts()
		if err := free(b); err != nil {
			t.Fatal(err)
		}
		for i, v := range w { // read right after the free: nothing else ran in between
			if v != DefaultPoisonWord {
				t.Fatalf("word %d of the freed block is %#x after Free returned, want the "+
					"poison %#x", i, v, DefaultPoisonWord)
			}
		}
		if now, _ := a.queueCounts(); now != queued {
			t.Fatal("a free waited in the queue while poison was on")
		}
	}
	frees := map[string]func(a *Arena) func(Block) error{
		"Free": func(a *Arena) func(Block) error {
			return func(b Block) error { return a.Free(b.Ptr) }
		},
		"FreeBlock": func(a *Arena) func(Block) error { return a.FreeBlock },
	}
	for name, free := range frees {
		t.Run("config/"+name, func(t *testing.T) {
			a := newHost(t, Config{CapacityBytes: miB, Flags: FlagPoison})
			check(t, a, free(a))
		})
		t.Run("SetPoison/"+name, func(t *testing.T) {
			a := newHostShards(t, Config{CapacityBytes: miB, ClearFlags: FlagPoison}, 1)
			before := mustAlloc(t, a, kiB)
			mustAlloc(t, a, kiB)
			if err := a.Free(before); err != nil { // queued while poison is off
				t.Fatal(err)
			}
			if err := a.SetPoison(true, 0); err != nil {
				t.Fatal(err)
			}
			if queued, _ := a.queueCounts(); queued != 1 || a.shards[0].n != 0 {
				t.Fatal("SetPoison did not apply the free queued before it")
			}
			check(t, a, free(a))
			if err := a.SetPoison(false, 0); err != nil {
				t.Fatal(err)
			}
			p := mustAlloc(t, a, kiB)
			mustAlloc(t, a, kiB)
			queued, _ := a.queueCounts()
			if err := free(a)(Block{Ptr: p, Epoch: a.Epoch()}); err != nil {
				t.Fatal(err)
			}
			if now, _ := a.queueCounts(); now != queued+1 {
				t.Fatal("with poison off again, the free did not wait in the queue")
			}
		})
	}
	// A failed free that crossed at once is reported as a queued one: kept, not returned.
	a := newHost(t, Config{CapacityBytes: miB, Flags: FlagPoison})
	p := mustAlloc(t, a, kiB)
	for i := 0; i < 2; i++ {
		if err := a.Free(p); err != nil {
			t.Fatalf("free %d: %v", i, err)
		}
	}
	if errs := a.FreeErrors(); len(errs) != 1 || !errors.Is(errs[0], ErrDoubleFree) {
		t.Fatalf("FreeErrors %v", errs)
	}
}

// When a queue buffer cannot be allocated, frees cross at once, under their shard's lock:
// they are applied (and reported like queued ones), and Close, racing them from another
// goroutine, waits for those in their crossing; the later ones get ErrClosed.
func TestFreesWithoutABufferCrossAtOnceAndNeverRaceClose(t *testing.T) {
	noBuffers := func() unsafe.Pointer { return nil }
	a := newHostShards(t, Config{CapacityBytes: 4 * miB}, 1)
	a.newQueueBuffer = noBuffers
	p := mustAlloc(t, a, kiB)
	mustAlloc(t, a, kiB)
	if err := a.Free(p); err != nil {
		t.Fatal(err)
	}
	if queued, batches := a.queueCounts(); queued != 0 || batches != 0 {
		t.Fatalf("%d frees queued without a buffer", queued)
	}
	if a.shards[0].buf != 0 {
		t.Fatal("the shard has a buffer")
	}
	if s := mustStats(t, a); s.LiveAllocs != 1 || s.FreeListLen != 1 {
		t.Fatalf("the free was not applied: %+v", s)
	}
	if err := a.Free(p); err != nil {
		t.Fatal(err)
	}
	if errs := a.FreeErrors(); len(errs) != 1 || !errors.Is(errs[0], ErrDoubleFree) {
		t.Fatalf("the failed free is not kept: %v", errs)
	}

	for round := 0; round < 20; round++ {
		a := newHost(t, Config{CapacityBytes: 16 * miB})
		a.newQueueBuffer = noBuffers
		const goroutines, perG = 4, 64
		blocks := make([][]DevicePtr, goroutines)
		for g := range blocks {
			for i := 0; i < perG; i++ {
				blocks[g] = append(blocks[g], mustAlloc(t, a, 4*kiB))
			}
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		var freed, refused atomic.Int64
		for g := 0; g < goroutines; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				<-start
				for _, p := range blocks[g] {
					switch err := a.Free(p); {
					case err == nil:
						freed.Add(1)
					case errors.Is(err, ErrClosed):
						refused.Add(1)
					default:
						t.Error(err)
					}
				}
			}(g)
		}
		close(start)
		runtime.Gosched()
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if freed.Load()+refused.Load() != goroutines*perG {
			t.Fatalf("round %d: %d freed + %d refused", round, freed.Load(), refused.Load())
		}
	}
}

// Close racing every kind of call: each completes before it or fails with ErrClosed.
func TestCloseRacingCalls(t *testing.T) {
	for round := 0; round < 20; round++ {
		a := newHost(t, Config{CapacityBytes: 16 * miB})
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; ; i++ {
					p, err := a.Alloc(uint64(256 * (1 + i%8)))
					if err == nil {
						switch i % 4 {
						case 0:
						case 1:
							_, err = a.Stats()
						case 2:
							if err = a.Pin(p); err == nil {
								err = a.Unpin(p)
							}
						case 3:
							_, err = a.Diagnose()
						}
					}
					if err == nil {
						if i%2 == 0 {
							err = a.Free(p)
						} else {
							err = a.FreeNow(p, AnyEpoch)
						}
					}
					if errors.Is(err, ErrClosed) {
						return
					}
					if err != nil {
						t.Error(err)
						return
					}
				}
			}(g)
		}
		time.Sleep(time.Millisecond)
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
	}
}

// With fewer shards than probes, lockBusy's probes come round to the home: one that takes
// it holds it (it must not lock it a second time, which would never return).
func TestLockBusyWithOneShard(t *testing.T) {
	a := newHostShards(t, Config{CapacityBytes: miB}, 1)
	s := a.lockBusy(0)
	if s != &a.shards[0] {
		t.Fatalf("lockBusy locked shard %p, want the only one", s)
	}
	if a.shards[0].mu.TryLock() {
		t.Fatal("lockBusy returned without holding the shard")
	}
	s.mu.Unlock()
}

// A planned steady state's boundary locks shard 0 alone (lockQuiet) only when no shard has
// anything for the library: a free queued on any shard before StepBegin or Reset is applied
// by it, as with every shard locked; and once the shards are empty again the boundary takes
// the quiet way (nothing else locked, the plan still served).
func TestPlannedBoundaryAppliesEveryShardsFrees(t *testing.T) {
	a := newHostShards(t, Config{CapacityBytes: 8 * miB, Flags: FlagPlan}, 8)
	var old []Block // blocks older than the steps: their frees are not the steps'
	for i := 0; i < 16; i++ {
		b, err := a.AllocBlock(kiB)
		if err != nil {
			t.Fatal(err)
		}
		old = append(old, b)
	}
	if err := a.MarkStepBoundary(); err != nil { // they survive the resets below
		t.Fatal(err)
	}
	if _, err := planPairs(a, 4*planStep); err != nil { // learned and engaged
		t.Fatal(err)
	}
	if !a.lockQuiet() {
		t.Fatal("an engaged plan with every shard empty: the boundary is not quiet")
	}
	a.shards[0].mu.Unlock()
	for round, b := range old {
		shard := round % len(a.shards)
		if err := queueOn(a, shard, b.Ptr, b.Epoch); err != nil {
			t.Fatal(err)
		}
		if !a.shards[shard].work.Load() {
			t.Fatalf("shard %d holds a queued free but is not marked", shard)
		}
		live := mustStats(t, a).LiveAllocs                                           // Stats applies it (a whole-arena call)
		if err := queueOn(a, (shard+3)%len(a.shards), b.Ptr, AnyEpoch); err != nil { // double
			t.Fatal(err)
		}
		boundary, name := a.StepBegin, "StepBegin"
		if round%2 == 1 {
			boundary, name = a.Reset, "Reset"
		}
		if err := boundary(); err != nil {
			t.Fatal(err)
		}
		for i := range a.shards {
			s := &a.shards[i]
			s.mu.Lock()
			n, work := s.n, s.work.Load()
			s.mu.Unlock()
			if n != 0 || work {
				t.Fatalf("round %d: after %s shard %d holds %d frees (marked: %v)", round, name, i, n, work)
			}
		}
		if got := mustStats(t, a).LiveAllocs; got != live {
			t.Fatalf("round %d: %d live after %s, want %d", round, got, name, live)
		}
		if errs := a.FreeErrors(); len(errs) != 1 || !errors.Is(errs[0], ErrDoubleFree) {
			t.Fatalf("round %d: FreeErrors %v, want the queued double free", round, errs)
		}
		if served, err := planPairs(a, planStep); err != nil || served != planStep {
			t.Fatalf("round %d: %d of %d pairs served by the plan (%v)", round, served, planStep, err)
		}
		if !a.lockQuiet() {
			t.Fatalf("round %d: every shard empty again, but the boundary is not quiet", round)
		}
		a.shards[0].mu.Unlock()
	}
}
