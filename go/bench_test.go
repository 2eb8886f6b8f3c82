package zarena

import (
	"fmt"
	"math"
	"math/rand"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/zarena/zarena/go/internal/cgotest"
)

// The binding against a pure-Go arena (goArena, built like ztensor's) and against its own
// floor, in the same run. scripts/go-bench-report.sh prints the ratios the targets are
// stated in. Step plans are on by default: the cases of the plain path (every zarena case
// but zarena-plan, PlanPair/plan and PlanPairParallel) turn them off (FlagNoPlan).
//
//	Pair        alloc+free of 256 B: Go binding (Free queued, applied by the next
//	            Alloc: one crossing per pair), on a Lane (the freed block kept: no
//	            crossing), pure Go, the C pair (N pairs in one C call, divided by N), and
//	            the checked binding (FreeNow: two crossings, the second a whole-arena call)
//	CgoCall     one empty cgo call (EmptyCgoPair: two); with the C pair, the floor the
//	            Go pair is held to (<= 1.2x their sum)
//	AllocFreeParallel  the 4 KiB pair on g = 1, 2, 4, 8, 16 goroutines sharing one arena
//	            (ns per pair of wall time: g=1 / g=16 is the throughput ratio, >= 8 on 16
//	            cores), and the C pair likewise (c/g=N)
//	BumpReset   256 B allocations, a reset after every 4096 (time per allocation)
//	Holes       a 512 B pair with 10 000 256 B holes in the free list
//	Trace       one realistic sample: 4096 allocations of 256 B..256 KiB, a third of them
//	            freed as they die, then a reset (time per sample); zarena-plan: the same
//	            under a step plan; zarena-lane: on a Lane
//	PlanPair    the 256 B pair in steps of 64 pairs (StepBegin between steps, its crossing
//	            included): under a step plan, served by the binding without crossings, and
//	            the same workload without a plan, and the pure-Go pair
//	PlanPairParallel  PlanPair's plan case on g = 1, 2, 4, 8, 16 goroutines, each with its
//	            own arena and plan (one arena's plan follows one sequence of allocations:
//	            goroutines interleaving on it deviate from it); ns per pair of wall time
//	LanePlanPairParallel  the same on ONE arena, each goroutine with a Lane of its own
//	            (NewLane: its own slot and plan; Lane.StepBegin between steps); g=1 / g=16
//	            is the throughput ratio (target >= 12 on 16 cores)
//
// The zarena cases lock their goroutine to its OS thread, as a CUDA engine's dispatch
// goroutine is: the library keeps a free index per thread (docs/CONCURRENCY.md), and a
// goroutine that moved would see its holes in another thread's index.

const (
	pairSize   = 256
	bumpEvery  = 4096
	holeCount  = 10000
	traceAlloc = 4096
)

func BenchmarkCgoCall(b *testing.B) {
	for i := 0; i < b.N; i++ {
		cgotest.Empty()
	}
}

func BenchmarkEmptyCgoPair(b *testing.B) {
	for i := 0; i < b.N; i++ {
		cgotest.Empty()
		cgotest.Empty()
	}
}

// benchGoPair is the pure-Go arena's Alloc+Free pair, BenchmarkPair's and
// BenchmarkPlanPair's "go".
func benchGoPair(b *testing.B) {
	g := newGoArena(64 * miB)
	for i := 0; i < b.N; i++ {
		p, ok := g.alloc(pairSize)
		if !ok {
			b.Fatal("full")
		}
		g.freeBlock(p, pairSize)
	}
}

func BenchmarkPair(b *testing.B) {
	b.Run("zarena", func(b *testing.B) {
		defer lockThread()()
		a := newHost(b, Config{CapacityBytes: 64 * miB, Name: "bench", Flags: FlagNoPlan})
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			p, err := a.Alloc(pairSize)
			if err != nil {
				b.Fatal(err)
			}
			_ = a.Free(p)
		}
	})
	b.Run("zarena-lane", func(b *testing.B) { // one Lane: its freed blocks kept (lane_cache.go)
		a := newHost(b, Config{CapacityBytes: 64 * miB, Name: "bench", Flags: FlagNoPlan})
		l := a.Lane()
		_, _, served := a.keptCounts()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			p, err := l.Alloc(pairSize)
			if err != nil {
				b.Fatal(err)
			}
			_ = l.Free(p)
		}
		b.StopTimer()
		_, _, now := a.keptCounts()
		b.ReportMetric(float64(now-served)/float64(b.N), "kept/op")
	})
	b.Run("zarena-block", func(b *testing.B) { // AllocBlock + FreeBlock: epoch-checked
		defer lockThread()()
		a := newHost(b, Config{CapacityBytes: 64 * miB, Name: "bench", Flags: FlagNoPlan})
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			blk, err := a.AllocBlock(pairSize)
			if err != nil {
				b.Fatal(err)
			}
			_ = a.FreeBlock(blk)
		}
	})
	b.Run("zarena-batch16", func(b *testing.B) { // AllocBatch of 16, then 16 FreeBlocks
		defer lockThread()()
		a := newHost(b, Config{CapacityBytes: 64 * miB, Name: "bench", Flags: FlagNoPlan})
		sizes := make([]uint64, 16)
		for i := range sizes {
			sizes[i] = pairSize
		}
		blocks := make([]Block, len(sizes))
		b.ResetTimer()
		for i := 0; i < b.N; i += len(sizes) {
			if err := a.AllocBatch(sizes, 0, blocks); err != nil {
				b.Fatal(err)
			}
			for _, blk := range blocks {
				_ = a.FreeBlock(blk)
			}
		}
	})
	b.Run("zarena-sync", func(b *testing.B) { // FreeNow: two crossings
		defer lockThread()()
		a := newHost(b, Config{CapacityBytes: 64 * miB, Name: "bench", Flags: FlagNoPlan})
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			p, err := a.Alloc(pairSize)
			if err != nil {
				b.Fatal(err)
			}
			if err := a.FreeNow(p, AnyEpoch); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("go", benchGoPair)
	b.Run("c", func(b *testing.B) {
		h := cgotest.NewHostArena(64 * miB)
		defer cgotest.DestroyArena(h)
		b.ResetTimer()
		if st := cgotest.Pairs(h, b.N, pairSize); st != 0 {
			b.Fatalf("status %d", st)
		}
	})
	b.Run("c-dlsym", func(b *testing.B) { // the C pair through dlsym'ed pointers
		h := cgotest.NewHostArena(64 * miB)
		defer cgotest.DestroyArena(h)
		b.ResetTimer()
		if st := cgotest.PairsDlsym(h, b.N, pairSize); st == -1 {
			b.Skip("the library's symbols are not dynamic here (zarena_static build)")
		} else if st != 0 {
			b.Fatalf("status %d", st)
		}
	})
	b.Run("c-batched", func(b *testing.B) { // the C calls the binding makes, from C
		h := cgotest.NewHostArena(64 * miB)
		defer cgotest.DestroyArena(h)
		b.ResetTimer()
		if st := cgotest.PairsBatched(h, b.N, pairSize); st != 0 {
			b.Fatalf("status %d", st)
		}
	})
}

func BenchmarkBumpReset(b *testing.B) {
	b.Run("zarena", func(b *testing.B) {
		defer lockThread()()
		a := newHost(b, Config{CapacityBytes: 64 * miB, Name: "bench", Flags: FlagNoPlan})
		b.ResetTimer()
		n := 0
		for i := 0; i < b.N; i++ {
			if _, err := a.Alloc(pairSize); err != nil {
				b.Fatal(err)
			}
			if n++; n == bumpEvery {
				n = 0
				if err := a.Reset(); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("go", func(b *testing.B) {
		g := newGoArena(64 * miB)
		n := 0
		for i := 0; i < b.N; i++ {
			if _, ok := g.alloc(pairSize); !ok {
				b.Fatal("full")
			}
			if n++; n == bumpEvery {
				n = 0
				g.reset()
			}
		}
	})
	b.Run("c", func(b *testing.B) {
		h := cgotest.NewHostArena(64 * miB)
		defer cgotest.DestroyArena(h)
		b.ResetTimer()
		if st := cgotest.BumpReset(h, b.N, pairSize, bumpEvery); st != 0 {
			b.Fatalf("status %d", st)
		}
	})
}

func BenchmarkHoles(b *testing.B) {
	const big = 2 * pairSize // fits no hole
	b.Run("zarena", func(b *testing.B) {
		defer lockThread()()
		a := newHost(b, Config{CapacityBytes: 64 * miB, Name: "bench", Flags: FlagNoPlan})
		ptrs := make([]DevicePtr, 2*holeCount)
		for i := range ptrs {
			ptrs[i] = mustAlloc(b, a, pairSize)
		}
		for i := 0; i < len(ptrs); i += 2 {
			_ = a.Free(ptrs[i])
		}
		// The first block's hole may merge with space before it; the rest cannot.
		if s := mustStats(b, a); s.FreeListLen < holeCount-1 {
			b.Fatalf("%d holes, want %d", s.FreeListLen, holeCount)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			p, err := a.Alloc(big)
			if err != nil {
				b.Fatal(err)
			}
			_ = a.Free(p)
		}
	})
	b.Run("go", func(b *testing.B) {
		g := newGoArena(64 * miB)
		ptrs := make([]uintptr, 2*holeCount)
		for i := range ptrs {
			ptrs[i], _ = g.alloc(pairSize)
		}
		for i := 0; i < len(ptrs); i += 2 {
			g.freeBlock(ptrs[i], pairSize)
		}
		if len(g.free) != holeCount {
			b.Fatalf("%d holes", len(g.free))
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			p, ok := g.alloc(big)
			if !ok {
				b.Fatal("full")
			}
			g.freeBlock(p, big)
		}
	})
}

// sampleTrace is one training sample's allocations: sizes log-uniform in [256 B, 256 KiB]
// (fixed seed), and for every third allocation the free of the block allocated two
// before it (an intermediate that died); the rest is reclaimed by the reset.
type sampleOp struct {
	size   uint64
	freeOf int // index of the allocation freed after this one, -1 for none
}

func sampleTrace() []sampleOp {
	rng := rand.New(rand.NewSource(42))
	ops := make([]sampleOp, traceAlloc)
	for i := range ops {
		ops[i] = sampleOp{size: uint64(math.Exp(rng.Float64()*math.Log(1024))) * 256, freeOf: -1}
		if i%3 == 2 {
			ops[i].freeOf = i - 2
		}
	}
	return ops
}

func BenchmarkTrace(b *testing.B) {
	ops := sampleTrace()
	for _, c := range []struct {
		name  string
		flags Flags
	}{{"zarena", FlagNoPlan}, {"zarena-plan", FlagPlan}} { // each sample a step (Reset ends it)
		b.Run(c.name, func(b *testing.B) {
			defer lockThread()()
			a := newHost(b, Config{CapacityBytes: 512 * miB, Name: "bench", Flags: c.flags})
			blocks := make([]Block, len(ops))
			served := a.planServed()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for j, op := range ops {
					blk, err := a.AllocBlock(op.size)
					if err != nil {
						b.Fatal(err)
					}
					blocks[j] = blk
					if op.freeOf >= 0 {
						_ = a.FreeBlock(blocks[op.freeOf])
					}
				}
				if err := a.Reset(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(a.planServed()-served)/float64(b.N*len(ops)), "planned/alloc")
		})
	}
	b.Run("zarena-lane", func(b *testing.B) { // on a Lane: freed blocks kept for their size
		defer lockThread()()
		a := newHost(b, Config{CapacityBytes: 512 * miB, Name: "bench", Flags: FlagNoPlan})
		l := a.Lane()
		blocks := make([]Block, len(ops))
		_, _, served := a.keptCounts()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			for j, op := range ops {
				blk, err := l.AllocBlock(op.size)
				if err != nil {
					b.Fatal(err)
				}
				blocks[j] = blk
				if op.freeOf >= 0 {
					_ = l.FreeBlock(blocks[op.freeOf])
				}
			}
			if err := a.Reset(); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		_, _, now := a.keptCounts()
		b.ReportMetric(float64(now-served)/float64(b.N*len(ops)), "kept/alloc")
	})
	b.Run("go", func(b *testing.B) {
		g := newGoArena(512 * miB)
		ptrs := make([]uintptr, len(ops))
		for i := 0; i < b.N; i++ {
			for j, op := range ops {
				p, ok := g.alloc(int(op.size))
				if !ok {
					b.Fatal("full")
				}
				ptrs[j] = p
				if op.freeOf >= 0 {
					g.freeBlock(ptrs[op.freeOf], int(ops[op.freeOf].size))
				}
			}
			g.reset()
		}
	})
}

// lockThread locks the goroutine to its thread; defer the function it returns.
func lockThread() func() {
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}

// parallelGoroutines are the goroutine counts of BenchmarkAllocFreeParallel.
var parallelGoroutines = []int{1, 2, 4, 8, 16}

// BenchmarkAllocFreeParallel: g goroutines on one arena, each making its share of b.N
// Alloc+Free pairs of 4 KiB; ns/op is wall time per pair, so g=1's ns/op divided by
// g=16's is how many times one goroutine's throughput sixteen reach (the target: >= 8 on
// 16 cores). busy/op counts the calls whose shard another goroutine held, shared-homes the
// goroutines whose home another one had too (at the end of their loop; a stack that grew
// moved), threads the process's OS threads (see osThreads). lane/g=N: each goroutine with
// a Lane of its own (no shared homes). c/g=N is the C pair on N goroutines (each a C loop
// in one call), the ceiling the library sets.
func BenchmarkAllocFreeParallel(b *testing.B) {
	for _, g := range parallelGoroutines {
		b.Run(fmt.Sprintf("g=%d", g), func(b *testing.B) {
			a := newHost(b, Config{CapacityBytes: 256 * miB, Name: "bench", Flags: FlagNoPlan})
			busy := a.busyCount()
			var mu sync.Mutex
			homes := map[uint32]bool{}
			onGoroutines(b, g, func(n int) error {
				for i := 0; i < n; i++ {
					p, err := a.Alloc(4096)
					if err != nil {
						return err
					}
					_ = a.Free(p)
				}
				var frame byte // in the frame Alloc and Free are inlined into: their home
				mu.Lock()
				homes[a.home(uintptr(unsafe.Pointer(&frame)))] = true
				mu.Unlock()
				return nil
			})
			b.ReportMetric(float64(a.busyCount()-busy)/float64(b.N), "busy/op")
			b.ReportMetric(float64(g-len(homes)), "shared-homes")
			b.ReportMetric(float64(osThreads()), "threads")
		})
	}
	for _, g := range parallelGoroutines { // the same, each goroutine with a Lane of its own
		b.Run(fmt.Sprintf("lane/g=%d", g), func(b *testing.B) {
			a := newHost(b, Config{CapacityBytes: 256 * miB, Name: "bench", Flags: FlagNoPlan})
			busy := a.busyCount()
			onGoroutines(b, g, func(n int) error {
				l := a.Lane()
				for i := 0; i < n; i++ {
					p, err := l.Alloc(4096)
					if err != nil {
						return err
					}
					_ = l.Free(p)
				}
				return nil
			})
			b.ReportMetric(float64(a.busyCount()-busy)/float64(b.N), "busy/op")
		})
	}
	for _, g := range parallelGoroutines {
		b.Run(fmt.Sprintf("c/g=%d", g), func(b *testing.B) {
			h := cgotest.NewHostArena(256 * miB)
			defer cgotest.DestroyArena(h)
			onGoroutines(b, g, func(n int) error {
				if st := cgotest.Pairs(h, n, 4096); st != 0 {
					return fmt.Errorf("status %d", st)
				}
				return nil
			})
		})
	}
}

// osThreads is how many OS threads the process has (0 where /proc does not say). The
// library gives each thread that calls in a number, for good, and a thread works in slot
// number mod the slot count (twice the hardware threads): once the process has had more
// threads than slots, goroutines running at once on different threads may share a slot,
// and with it a lock and cache lines. Go makes a thread whenever a crossing outlasts
// sysmon's patience and its P is handed on, so a long benchmark run can get there.
func osThreads() int {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// onGoroutines runs b.N iterations of work split over g goroutines started together, and
// times them from the start to the last one's end.
func onGoroutines(b *testing.B, g int, work func(n int) error) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for k := 0; k < g; k++ {
		n := b.N / g
		if k < b.N%g {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if err := work(n); err != nil {
				b.Error(err)
			}
		}()
	}
	b.ResetTimer()
	close(start)
	wg.Wait()
}

// planStep is the pairs per step of the PlanPair benchmarks.
const planStep = 64

// planPairs makes n alloc+free pairs of pairSize on a, in steps of planStep (StepBegin
// before each), and returns the pairs the binding served from the plan.
func planPairs(a *Arena, n int) (uint64, error) {
	served := a.planServed()
	for i := 0; i < n; i++ {
		if i%planStep == 0 {
			if err := a.StepBegin(); err != nil {
				return 0, err
			}
		}
		p, err := a.Alloc(pairSize)
		if err != nil {
			return 0, err
		}
		_ = a.Free(p)
	}
	return a.planServed() - served, nil
}

// newPlanBenchArena is a host arena whose step plan (flags: FlagPlan, which plans being on
// by default changes nothing, or FlagNoPlan for none) is learned before the timer starts.
func newPlanBenchArena(b *testing.B, flags Flags) *Arena {
	a := newHost(b, Config{CapacityBytes: 8 * miB, Name: "bench", Flags: flags})
	if _, err := planPairs(a, 4*planStep); err != nil {
		b.Fatal(err)
	}
	return a
}

func BenchmarkPlanPair(b *testing.B) {
	for _, c := range []struct {
		name  string
		flags Flags
	}{{"plan", FlagPlan}, {"dynamic", FlagNoPlan}} {
		b.Run(c.name, func(b *testing.B) {
			defer lockThread()()
			a := newPlanBenchArena(b, c.flags)
			b.ResetTimer()
			served, err := planPairs(a, b.N)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(served)/float64(b.N), "planned/op")
			if c.flags == FlagPlan && served < uint64(b.N)*9/10 {
				b.Fatalf("the binding served %d of %d pairs from the plan", served, b.N)
			}
		})
	}
	b.Run("go", benchGoPair)
}

// BenchmarkPlannedBoundary is the fixed cost of a planned step's boundary in Go (bench_arena's
// BM_PlannedBoundary): StepBegin or Reset alone, again and again, on an arena whose plan is
// engaged (a boundary with no allocation since the last one is no step: the plan stays
// engaged). Each is one crossing with every shard locked around it: run with -test.cpu to
// see the shards' part (2 per P).
func BenchmarkPlannedBoundary(b *testing.B) {
	for _, c := range []struct {
		name     string
		boundary func(a *Arena) error
	}{{"StepBegin", (*Arena).StepBegin}, {"Reset", (*Arena).Reset}} {
		b.Run(c.name, func(b *testing.B) {
			defer lockThread()()
			a := newPlanBenchArena(b, FlagPlan)
			if a.plan.Load() == nil {
				b.Fatal("no plan engaged")
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := c.boundary(a); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if pl := a.plan.Load(); pl == nil || atomic.LoadUint64(pl.state)&planSEngagedMask == 0 {
				b.Fatal("the plan left")
			}
		})
	}
}

func BenchmarkPlanPairParallel(b *testing.B) {
	for _, g := range parallelGoroutines {
		b.Run(fmt.Sprintf("g=%d", g), func(b *testing.B) {
			arenas := make([]*Arena, g)
			for k := range arenas {
				arenas[k] = newPlanBenchArena(b, FlagPlan)
			}
			var next, served atomic.Uint64
			onGoroutines(b, g, func(n int) error {
				a := arenas[next.Add(1)-1]
				s, err := planPairs(a, n)
				served.Add(s)
				return err
			})
			b.StopTimer()
			b.ReportMetric(float64(served.Load())/float64(b.N), "planned/op")
		})
	}
}

// lanePlanPairs is planPairs on Lane l (its own plan; Lane.StepBegin before each step).
func lanePlanPairs(l Lane, n int) error {
	for i := 0; i < n; i++ {
		if i%planStep == 0 {
			if err := l.StepBegin(); err != nil {
				return err
			}
		}
		p, err := l.Alloc(pairSize)
		if err != nil {
			return err
		}
		_ = l.Free(p)
	}
	return nil
}

func BenchmarkLanePlanPairParallel(b *testing.B) {
	for _, g := range parallelGoroutines {
		b.Run(fmt.Sprintf("g=%d", g), func(b *testing.B) {
			a := newHost(b, Config{CapacityBytes: 64 * miB, Name: "bench", Flags: FlagPlan})
			lanes := make([]Lane, g)
			for k := range lanes {
				l, err := a.NewLane()
				if err != nil {
					b.Fatal(err)
				}
				if err := lanePlanPairs(l, 4*planStep); err != nil { // learned before the timer
					b.Fatal(err)
				}
				lanes[k] = l
			}
			served := a.planServed()
			var next atomic.Uint64
			onGoroutines(b, g, func(n int) error {
				return lanePlanPairs(lanes[next.Add(1)-1], n)
			})
			b.StopTimer()
			b.ReportMetric(float64(a.planServed()-served)/float64(b.N), "planned/op")
		})
	}
}
