package zarena

import (
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"testing"
)

// Kept blocks (lane_cache.go): a Lane's plain pair makes no crossing, misuse is caught at
// the call, and the library's counters are those of the calls made, whenever it is asked.
// Step plans are on by default and come first (nothing is kept while they follow the
// requests): the tests of the kept blocks themselves turn them off (FlagNoPlan);
// TestLanesKeepOnlyWhilePlansWatchNothing is about the two together.

// A Lane's Alloc+Free pair of one size: after the first crossing every allocation is a kept
// block, the same one; the library's stats then count every request.
func TestLanePairIsServedFromKeptBlocks(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 4 * miB, Flags: FlagNoPlan})
	l := a.Lane()
	first, err := l.Alloc(1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Free(first); err != nil {
		t.Fatal(err)
	}
	_, _, served := a.keptCounts()
	queued, batches := a.queueCounts()
	const n = 1000
	for i := 0; i < n; i++ {
		p, err := l.Alloc(1000 - uint64(i%200)) // one rounded size
		if err != nil {
			t.Fatal(err)
		}
		if p != first {
			t.Fatalf("pair %d: %#x, want the kept block %#x", i, p, first)
		}
		if err := l.Free(p); err != nil {
			t.Fatal(err)
		}
	}
	kept, bytes, now := a.keptCounts()
	if now-served != n || kept != 1 || bytes != 1024 {
		t.Fatalf("%d of %d allocations kept; %d blocks (%d bytes) kept now", now-served, n, kept,
			bytes)
	}
	if q, b := a.queueCounts(); q != queued || b != batches {
		t.Fatalf("%d frees queued, %d crossings applied frees: the pairs crossed", q-queued,
			b-batches)
	}
	s := mustStats(t, a) // gives the kept block back
	if s.EpochAllocs != n+1 || s.Hits != n+1 || s.Reuses < n || s.LiveAllocs != 0 ||
		s.UsedBytes != 0 || s.EpochMaxAllocBytes != 1000 || s.InvalidFrees != 0 {
		t.Fatalf("stats %+v: want %d requests and hits, %d reuses, nothing live", s, n+1, n)
	}
	if kept, _, _ := a.keptCounts(); kept != 0 {
		t.Fatalf("%d blocks still kept after Stats", kept)
	}
}

// A big block is never kept: freed on a Lane, it goes to the library, which shares it
// (freed blocks of 512 KiB or more join its central side, docs/CONCURRENCY.md), so another
// goroutine's request of the size is served by it. One of 512 KiB is kept, one above not.
func TestLanesLeaveBigBlocksToTheLibrary(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 64 * miB, Flags: FlagNoPlan})
	l := a.Lane()
	for _, c := range []struct {
		size uint64
		kept int
	}{{512 * kiB, 1}, {512*kiB + 256, 0}, {768 * kiB, 0}} {
		p, err := l.Alloc(c.size)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Free(p); err != nil {
			t.Fatal(err)
		}
		if kept, _, _ := a.keptCounts(); kept != c.kept {
			t.Fatalf("a block of %d bytes freed on a Lane: %d blocks kept, want %d", c.size, kept,
				c.kept)
		}
		mustStats(t, a) // gives kept blocks back
	}
}

// Misuse of a tracked block is answered at the call, with the error a queued free gets from
// the library, and counted by the library.
func TestLaneMisuseIsCaughtAtTheCall(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 4 * miB, Flags: FlagNoPlan})
	captureLogs(t, a.Name(), LevelError)
	l := a.Lane()
	b, err := l.AllocBlock(4 * kiB)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.FreeBlock(Block{Ptr: b.Ptr, Epoch: b.Epoch + 1}); !errors.Is(err, ErrStale) {
		t.Fatalf("FreeBlock naming another epoch: %v, want ErrStale", err)
	}
	var fe *FreeError
	if err := l.FreeBlock(b); err != nil {
		t.Fatal(err)
	}
	for _, free := range []func() error{
		func() error { return l.Free(b.Ptr) },
		func() error { return l.FreeBlock(b) },
		func() error { return a.Free(b.Ptr) },
		func() error { return a.Lane().Free(b.Ptr) },
	} {
		err := free()
		if !errors.Is(err, ErrDoubleFree) || !errors.As(err, &fe) || fe.Ptr != b.Ptr {
			t.Fatalf("free of a kept block: %v, want a *FreeError for ErrDoubleFree", err)
		}
	}
	inner := b.Ptr + DevicePtr(a.align) // not a block start: the library answers
	if err := l.Free(inner); err != nil {
		t.Fatal(err)
	}
	errs := a.FreeErrors()
	if len(errs) != 6 || !errors.Is(errs[5], ErrNotOwned) {
		t.Fatalf("FreeErrors: %v, want the five refused at the call, then ErrNotOwned", errs)
	}
	s := mustStats(t, a)
	if s.StaleFrees != 1 || s.InvalidFrees != 5 || s.LiveAllocs != 0 {
		t.Fatalf("stats: %d stale, %d invalid frees, %d live; want 1, 5, 0", s.StaleFrees,
			s.InvalidFrees, s.LiveAllocs)
	}
	// Given back by Stats: the block is the library's again, and so is the answer.
	if err := a.FreeNow(b.Ptr, AnyEpoch); !errors.Is(err, ErrDoubleFree) {
		t.Fatalf("FreeNow of a freed block: %v, want ErrDoubleFree", err)
	}
}

// Every call that looks at the arena as a whole gives the kept blocks back first: the
// library's live blocks and stats are the caller's.
func TestKeptBlocksGoBackBeforeWholeArenaCalls(t *testing.T) {
	calls := map[string]func(a *Arena) error{
		"Stats":            func(a *Arena) error { _, err := a.Stats(); return err },
		"LiveBlocks":       func(a *Arena) error { _, err := a.LiveBlocks(); return err },
		"MarkStepBoundary": func(a *Arena) error { return a.MarkStepBoundary() },
		"StepBegin":        func(a *Arena) error { return a.StepBegin() },
		"FreeErrors":       func(a *Arena) error { a.FreeErrors(); return nil },
		"Reset":            func(a *Arena) error { return a.Reset() },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			a := newHost(t, Config{CapacityBytes: 4 * miB, Flags: FlagNoPlan})
			l := a.Lane()
			var ps []DevicePtr
			for i := 0; i < 10; i++ {
				ps = append(ps, mustLaneAlloc(t, l, uint64(256*(1+i%3))))
			}
			for _, p := range ps[:7] {
				if err := l.Free(p); err != nil {
					t.Fatal(err)
				}
			}
			if kept, _, _ := a.keptCounts(); kept != 7 {
				t.Fatalf("%d blocks kept, want 7", kept)
			}
			if err := call(a); err != nil {
				t.Fatal(err)
			}
			if kept, _, _ := a.keptCounts(); kept != 0 {
				t.Fatalf("%d blocks still kept after %s", kept, name)
			}
			live, err := a.LiveBlocks()
			if err != nil {
				t.Fatal(err)
			}
			want := 3
			if name == "Reset" {
				want = 0
			}
			if len(live) != want {
				t.Fatalf("after %s: %d live blocks, want %d", name, len(live), want)
			}
		})
	}
}

// Kept blocks under the floor would survive every reset: they are given back before the
// reset, so the floor keeps only what the caller holds.
func TestKeptBlocksBelowTheFloorGoBackAtReset(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 4 * miB, Flags: FlagNoPlan})
	l := a.Lane()
	w := mustLaneAlloc(t, l, 4*kiB)
	tmp := mustLaneAlloc(t, l, 4*kiB)
	if err := l.Free(tmp); err != nil {
		t.Fatal(err)
	}
	if err := a.MarkStepBoundary(); err != nil { // gives tmp back first
		t.Fatal(err)
	}
	for step := 0; step < 3; step++ {
		for i := 0; i < 5; i++ {
			if err := l.Free(mustLaneAlloc(t, l, 4*kiB)); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.Reset(); err != nil {
			t.Fatal(err)
		}
	}
	live, err := a.LiveBlocks()
	if err != nil {
		t.Fatal(err)
	}
	if len(live) != 1 || live[0].Ptr != w {
		t.Fatalf("live after the resets: %+v, want the weights %#x only", live, w)
	}
	// A block of an epoch that ended: the library's answer (the index forgot it).
	if err := a.FreeNow(tmp, 0); !errors.Is(err, ErrDoubleFree) && !errors.Is(err, ErrStale) {
		t.Fatalf("free of a block given back: %v", err)
	}
}

// A pinned block is never kept: its free is the library's (deferred to the last unpin), and
// no allocation gets it meanwhile.
func TestLaneNeverKeepsAPinnedBlock(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 4 * miB, Flags: FlagNoPlan})
	l := a.Lane()
	p := mustLaneAlloc(t, l, 4*kiB)
	if err := a.Pin(p + 100); err != nil { // inside the block
		t.Fatal(err)
	}
	if err := l.Free(p); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		if q := mustLaneAlloc(t, l, 4*kiB); q == p {
			t.Fatalf("the pinned block %#x was handed out again", p)
		}
	}
	if s := mustStats(t, a); s.DeferredFrees != 1 {
		t.Fatalf("%d deferred frees, want the pinned block's", s.DeferredFrees)
	}
	if err := a.Unpin(p); err != nil {
		t.Fatal(err)
	}
	if s := mustStats(t, a); s.DeferredFrees != 0 {
		t.Fatalf("%d deferred frees after the unpin", s.DeferredFrees)
	}
}

// Nothing is kept where the library must see every call (plans, a trace), with
// FlagDiagnoseSync, or while poison is on (a free fills at once).
func TestNothingIsKeptWhereEveryCallCounts(t *testing.T) {
	for _, c := range []struct {
		name  string
		flags Flags
	}{{"plans learning", 0}, {"diagnose-sync", FlagDiagnoseSync | FlagNoPlan},
		{"poison", FlagPoison | FlagNoPlan}} {
		t.Run(c.name, func(t *testing.T) {
			a := newHost(t, Config{CapacityBytes: 4 * miB, Flags: c.flags})
			l := a.Lane()
			for i := 0; i < 10; i++ {
				if err := l.Free(mustLaneAlloc(t, l, 4*kiB)); err != nil {
					t.Fatal(err)
				}
			}
			if kept, _, served := a.keptCounts(); kept != 0 || served != 0 {
				t.Fatalf("%d kept, %d served from kept blocks", kept, served)
			}
		})
	}
	t.Run("SetPoison", func(t *testing.T) {
		a := newHost(t, Config{CapacityBytes: 4 * miB, Flags: FlagNoPlan})
		l := a.Lane()
		p := mustLaneAlloc(t, l, 4*kiB)
		if err := l.Free(p); err != nil {
			t.Fatal(err)
		}
		if err := a.SetPoison(true, 0); err != nil {
			t.Fatal(err)
		}
		q := mustLaneAlloc(t, l, 4*kiB)
		if err := l.Free(q); err != nil {
			t.Fatal(err)
		}
		if kept, _, _ := a.keptCounts(); kept != 0 {
			t.Fatalf("%d blocks kept with poison on", kept)
		}
		if w := *(*uint32)(q.Pointer()); w != DefaultPoisonWord {
			t.Fatalf("a freed block holds %#x, not the poison word", w)
		}
	})
}

// An arena too full for a request while Lanes keep blocks: they are given back and the
// request is served.
func TestKeptBlocksGoBackWhenTheRegionIsFull(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 256 * kiB, OverflowPolicy: OverflowRefuse,
		Flags: FlagNoPlan})
	captureLogs(t, a.Name(), LevelError)
	l := a.Lane()
	var ps []DevicePtr
	for {
		p, err := l.Alloc(kiB)
		if err != nil {
			break
		}
		ps = append(ps, p)
	}
	for _, p := range ps {
		if err := l.Free(p); err != nil {
			t.Fatal(err)
		}
	}
	if kept, _, _ := a.keptCounts(); kept == 0 {
		t.Fatal("nothing kept: the test checks nothing")
	}
	if _, err := l.Alloc(16 * kiB); err != nil { // another size: only the kept space fits it
		t.Fatalf("Alloc with the region's space in kept blocks: %v", err)
	}
}

// Lane pairs and the same calls on a plain arena: the same answers (misuse of a tracked
// block at the call, the plain arena's later, in FreeErrors) and the same request and
// refused-free counters, over random traces with resets, double and stale frees. (Which
// refusal a double free is, double free, not owned or stale, depends on what became of the
// block's space in the library; a kept block stays whole.)
func TestLaneCountsMatchAPlainArena(t *testing.T) {
	for seed := int64(0); seed < 8; seed++ {
		rng := rand.New(rand.NewSource(seed))
		keep := newHost(t, Config{CapacityBytes: 8 * miB, Name: fmt.Sprintf("kept-%d", seed),
			Flags: FlagNoPlan})
		plain := newHost(t, Config{CapacityBytes: 8 * miB, Name: fmt.Sprintf("plain-%d", seed),
			Flags: FlagNoPlan})
		captureLogs(t, "", LevelError)
		l := keep.Lane()
		type held struct {
			k, p Block
		}
		var live, freed []held
		// The plain arena's answer: its call's, or the failure the library recorded once the
		// queue is applied. The Lane's: its call's only (nil for a free it kept, or queued:
		// a FreeErrors here would give every kept block back); the library's counters
		// compared every 100 operations cover the queued ones.
		status := func(a *Arena, err error) Status {
			if a == keep {
				return StatusOf(err)
			}
			errs := a.FreeErrors()
			if err != nil {
				return StatusOf(err)
			}
			if len(errs) > 0 {
				return StatusOf(errs[len(errs)-1])
			}
			return StatusOK
		}
		for op := 0; op < 3000; op++ {
			where := fmt.Sprintf("seed %d op %d", seed, op)
			switch r := rng.Intn(100); {
			case r < 50 || len(live) == 0:
				n := uint64(256 * (1 + rng.Intn(4)))
				kb, err1 := l.AllocBlock(n)
				pb, err2 := plain.AllocBlock(n)
				if err1 != nil || err2 != nil {
					t.Fatalf("%s: %v, %v", where, err1, err2)
				}
				live = append(live, held{kb, pb})
				// A freed block handed out again is live: no longer one to free twice.
				kept := freed[:0]
				for _, h := range freed {
					if h.k.Ptr != kb.Ptr && h.p.Ptr != pb.Ptr {
						kept = append(kept, h)
					}
				}
				freed = kept
			case r < 90:
				i := rng.Intn(len(live))
				h := live[i]
				live = append(live[:i], live[i+1:]...)
				checked := rng.Intn(2) == 0
				var e1, e2 error
				if checked {
					e1, e2 = l.FreeBlock(h.k), plain.FreeBlock(h.p)
				} else {
					e1, e2 = l.Free(h.k.Ptr), plain.Free(h.p.Ptr)
				}
				s1, s2 := status(keep, e1), status(plain, e2)
				if s1 != StatusOK || s2 != StatusOK {
					t.Fatalf("%s: free: kept %v, plain %v", where, s1, s2)
				}
				freed = append(freed, h)
			case r < 95 && len(freed) > 0: // a double free, or one of another epoch
				// Refused by both (the library's word for it, double free, not owned or stale,
				// depends on what became of the block's space: a kept one stays whole).
				h := freed[rng.Intn(len(freed))]
				e1, e2 := l.FreeBlock(h.k), plain.FreeBlock(h.p)
				if s2 := status(plain, e2); s2 == StatusOK {
					t.Fatalf("%s: free of a freed block: plain %v (kept: %v)", where, s2, e1)
				}
			case r < 97 && len(live) > 0:
				h := live[rng.Intn(len(live))]
				e1 := l.FreeBlock(Block{Ptr: h.k.Ptr, Epoch: h.k.Epoch + 1})
				e2 := plain.FreeBlock(Block{Ptr: h.p.Ptr, Epoch: h.p.Epoch + 1})
				if s1, s2 := status(keep, e1), status(plain, e2); s2 != StatusStale ||
					(s1 != StatusOK && s1 != StatusStale) {
					t.Fatalf("%s: free naming another epoch: kept %v, plain %v", where, s1, s2)
				}
			default:
				if err1, err2 := keep.Reset(), plain.Reset(); err1 != nil || err2 != nil {
					t.Fatal(err1, err2)
				}
				freed = append(freed, live...) // reclaimed: a free of them is stale
				live = live[:0]
			}
			if op%100 == 99 {
				s1, s2 := mustStats(t, keep), mustStats(t, plain)
				if s1.EpochAllocs != s2.EpochAllocs || s1.Hits != s2.Hits ||
					s1.LiveAllocs != s2.LiveAllocs || s1.UsedBytes != s2.UsedBytes ||
					s1.InvalidFrees+s1.StaleFrees != s2.InvalidFrees+s2.StaleFrees ||
					s1.EpochMaxAllocBytes != s2.EpochMaxAllocBytes || s1.Epoch != s2.Epoch ||
					s1.Misses != s2.Misses {
					t.Fatalf("%s: stats differ:\n kept  %+v\n plain %+v", where, s1, s2)
				}
			}
		}
		if _, _, served := keep.keptCounts(); served == 0 {
			t.Fatalf("seed %d: nothing served from kept blocks: the test compared nothing", seed)
		}
	}
}

// Goroutines with Lanes of their own and goroutines without, freeing each other's blocks:
// no block is handed out twice while held, and the library ends with nothing live.
func TestKeptBlocksUnderConcurrency(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 64 * miB, Flags: FlagNoPlan})
	const workers = 8
	handoff := make(chan DevicePtr, 1024)
	var wg sync.WaitGroup
	var mu sync.Mutex
	owners := map[DevicePtr]int{}
	take := func(p DevicePtr, g int) {
		mu.Lock()
		defer mu.Unlock()
		if o, dup := owners[p]; dup || p == 0 {
			t.Errorf("block %#x handed to %d while %d holds it", p, g, o)
		}
		owners[p] = g
	}
	give := func(p DevicePtr) {
		mu.Lock()
		defer mu.Unlock()
		delete(owners, p)
	}
	for g := 0; g < workers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(g)))
			l := a.Lane()
			alloc, free := l.Alloc, l.Free
			if g%4 == 3 {
				alloc, free = a.Alloc, a.Free
			}
			var mine []DevicePtr
			for i := 0; i < 3000; i++ {
				p, err := alloc(uint64(256 * (1 + rng.Intn(3))))
				if err != nil {
					t.Error(err)
					return
				}
				take(p, g)
				mine = append(mine, p)
				if len(mine) > 16 {
					q := mine[0]
					mine = mine[1:]
					give(q)
					if rng.Intn(4) == 0 { // another goroutine frees it
						handoff <- q
					} else if err := free(q); err != nil {
						t.Error(err)
					}
				}
				select {
				case q := <-handoff:
					if err := free(q); err != nil {
						t.Error(err)
					}
				default:
				}
				if g == 0 && i%500 == 499 { // whole-arena calls meanwhile
					if _, err := a.Stats(); err != nil {
						t.Error(err)
					}
				}
			}
			for _, q := range mine {
				give(q)
				if err := free(q); err != nil {
					t.Error(err)
				}
			}
		}(g)
	}
	wg.Wait()
	close(handoff)
	for q := range handoff {
		if err := a.Free(q); err != nil {
			t.Error(err)
		}
	}
	if errs := a.FreeErrors(); len(errs) != 0 {
		t.Fatalf("frees failed: %v", errs)
	}
	if s := mustStats(t, a); s.LiveAllocs != 0 || s.InvalidFrees != 0 {
		t.Fatalf("%d live blocks, %d invalid frees at the end", s.LiveAllocs, s.InvalidFrees)
	}
	if _, _, served := a.keptCounts(); served == 0 {
		t.Fatal("nothing served from kept blocks: the test checks nothing")
	}
}

// Two frees of a kept-tracked block racing, from Lanes and not: the library counts one
// invalid free per race, and a free a Lane kept is never also given to the library.
func TestRacingFreesOfATrackedBlock(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 16 * miB, Flags: FlagNoPlan})
	captureLogs(t, a.Name(), LevelError)
	l := a.Lane()
	const races = 300
	atCall := 0
	for i := 0; i < races; i++ {
		p := mustLaneAlloc(t, l, 512)
		frees := []func() error{func() error { return a.Lane().Free(p) },
			func() error { return l.Free(p) }, func() error { return a.Free(p) }}
		f1, f2 := frees[i%3], frees[(i/3)%3]
		var e1, e2 error
		var w sync.WaitGroup
		w.Add(2)
		go func() { defer w.Done(); e1 = f1() }()
		go func() { defer w.Done(); e2 = f2() }()
		w.Wait()
		if e1 != nil && e2 != nil {
			t.Fatalf("race %d: both frees refused: %v, %v", i, e1, e2)
		}
		for _, e := range []error{e1, e2} {
			if e != nil {
				if !errors.Is(e, ErrDoubleFree) {
					t.Fatalf("race %d: %v, want ErrDoubleFree", i, e)
				}
				atCall++
			}
		}
		a.FreeErrors() // applies the queued ones before the next allocation
	}
	if s := mustStats(t, a); s.InvalidFrees != races || s.LiveAllocs != 0 {
		t.Fatalf("%d invalid frees over %d races (%d refused at the call), %d live", s.InvalidFrees,
			races, atCall, s.LiveAllocs)
	}
	if atCall == 0 {
		t.Fatal("no race was refused at the call")
	}
}

func mustLaneAlloc(t *testing.T, l Lane, n uint64) DevicePtr {
	t.Helper()
	p, err := l.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The index grows (rebuilds) while blocks are kept and while frees look it up: the kept
// blocks are found again, every block is tracked once the index has room, and the stats stay
// exact.
func TestKeptIndexGrowsUnderKeptBlocks(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 64 * miB, Flags: FlagNoPlan})
	l := a.Lane()
	var keptPtrs []DevicePtr
	for i := 0; i < 100; i++ {
		keptPtrs = append(keptPtrs, mustLaneAlloc(t, l, 512))
	}
	for _, p := range keptPtrs {
		if err := l.Free(p); err != nil {
			t.Fatal(err)
		}
	}
	var live []DevicePtr
	for i := 0; i < 20000; i++ { // past several rebuilds (the first table has 1024 slots)
		live = append(live, mustLaneAlloc(t, l, 1024))
	}
	// Each rebuild leaves untracked the one block whose insert found the index full.
	if n, used := len(a.kept.tab.Load().slots), a.kept.used.Load(); used < 20000-20 ||
		int64(n) < used*4/3 {
		t.Fatalf("the index tracks %d of 20100 blocks in %d slots", used, n)
	}
	seen := map[DevicePtr]bool{}
	for _, p := range keptPtrs {
		seen[p] = true
	}
	for range keptPtrs { // the kept blocks come back, and only they
		if p := mustLaneAlloc(t, l, 512); !seen[p] {
			t.Fatalf("%#x is not one of the kept blocks", p)
		} else {
			delete(seen, p)
		}
	}
	for i, p := range live {
		if err := l.Free(p); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if err := l.Free(p); !errors.Is(err, ErrDoubleFree) && err != nil {
				t.Fatalf("second free: %v", err)
			}
		}
	}
	a.FreeErrors()
	if s := mustStats(t, a); s.LiveAllocs != 100 || s.EpochAllocs != 20200 {
		t.Fatalf("%d live, %d requests; want 100 and 20200", s.LiveAllocs, s.EpochAllocs)
	}
}

// At its largest size, full of live blocks, the index stops growing: further blocks are not
// tracked (their frees are the library's), nothing fails, and a reset starts it over.
func TestKeptIndexStopsAtItsLargestSize(t *testing.T) {
	defer func(n int) { keptIndexMax = n }(keptIndexMax)
	keptIndexMax = 4096
	a := newHost(t, Config{CapacityBytes: 64 * miB, Flags: FlagNoPlan})
	l := a.Lane()
	var live []DevicePtr
	for i := 0; i < 10000; i++ {
		live = append(live, mustLaneAlloc(t, l, 512))
	}
	if n, used := len(a.kept.tab.Load().slots), a.kept.used.Load(); n != 4096 || used > 3072 ||
		!a.kept.atMax.Load() {
		t.Fatalf("index of %d slots, %d used, at its largest %v", n, used, a.kept.atMax.Load())
	}
	for _, p := range live {
		if err := l.Free(p); err != nil {
			t.Fatal(err)
		}
	}
	if errs := a.FreeErrors(); len(errs) != 0 {
		t.Fatal(errs)
	}
	if s := mustStats(t, a); s.LiveAllocs != 0 || s.EpochAllocs != 10000 {
		t.Fatalf("%d live, %d requests", s.LiveAllocs, s.EpochAllocs)
	}
	if err := a.Reset(); err != nil {
		t.Fatal(err)
	}
	_, _, before := a.keptCounts()
	for i := 0; i < 100; i++ {
		if err := l.Free(mustLaneAlloc(t, l, 512)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, after := a.keptCounts(); a.kept.atMax.Load() || after-before < 99 {
		t.Fatalf("after the reset: at its largest %v, %d kept allocations", a.kept.atMax.Load(),
			after-before)
	}
}

// Step plans come first (they are on by default): a Lane keeps nothing while the library
// learns a step or a plan serves it, and keeps blocks once the plans watch nothing (here:
// the learner gave up a program that marked no step, after 64k allocations), which the
// Lane finds by asking again now and then. A step boundary starts the learning again and
// the Lane stops keeping; the repeating step is then learned from every request and served
// by its plan, with nothing kept and no miss. The counters stay exact throughout.
func TestLanesKeepOnlyWhilePlansWatchNothing(t *testing.T) {
	a := newHostShards(t, Config{CapacityBytes: 4 * miB}, 1)
	l := a.Lane()
	pair := func() {
		t.Helper()
		if err := l.Free(mustLaneAlloc(t, l, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	const firstStepItems = 1 << 16 // StepPlans::kMaxFirstStepItems
	for i := 0; i < firstStepItems; i++ {
		pair()
	}
	if kept, _, served := a.keptCounts(); kept != 0 || served != 0 {
		t.Fatalf("while the plans learn: %d blocks kept, %d allocations served from them",
			kept, served)
	}
	pairs := firstStepItems
	for _, _, served := a.keptCounts(); served == 0; _, _, served = a.keptCounts() {
		if pairs++; pairs > firstStepItems+2*keptAskEvery {
			t.Fatalf("%d pairs and nothing kept: the learner gave up after %d", pairs,
				firstStepItems)
		}
		pair()
	}
	for i := 0; i < 100; i++ {
		pair()
	}
	pairs += 100
	if _, _, served := a.keptCounts(); served < 100 {
		t.Fatalf("%d of the last 100 allocations served from kept blocks", served)
	}
	if s := mustStats(t, a); s.EpochAllocs != uint64(pairs) || s.LiveAllocs != 0 ||
		s.PlansLearned != 0 {
		t.Fatalf("stats %+v: want %d requests, nothing live, no plan", s, pairs)
	}

	// Steps: learned from every request, then served by their plan.
	step := func() (planned int) {
		t.Helper()
		if err := a.StepBegin(); err != nil {
			t.Fatal(err)
		}
		var blocks []Block
		for _, n := range []uint64{1000, 3000, 512, 9000} {
			b, err := l.AllocBlock(n)
			if err != nil {
				t.Fatal(err)
			}
			if b.Flags&BlockPlanned != 0 {
				planned++
			}
			blocks = append(blocks, b)
		}
		for _, b := range blocks {
			if err := l.FreeBlock(b); err != nil {
				t.Fatal(err)
			}
		}
		return planned
	}
	_, _, served := a.keptCounts()
	steps := 0
	for step() == 0 {
		if steps++; steps > 16 {
			t.Fatalf("%d repeating steps and no plan: %+v", steps, mustStats(t, a))
		}
	}
	for i := 0; i < 8; i++ {
		if planned := step(); planned != 4 {
			t.Fatalf("step %d under the plan: %d of 4 allocations planned", i, planned)
		}
	}
	if kept, _, now := a.keptCounts(); kept != 0 || now != served {
		t.Fatalf("during the steps: %d blocks kept, %d allocations served from them", kept,
			now-served)
	}
	if s := mustStats(t, a); s.PlanMisses != 0 || s.PlanSteps < 8 || s.LiveAllocs != 0 {
		t.Fatalf("stats %+v: want the steps planned without a miss", s)
	}
}
