package zarena

import (
	"sort"
	"sync"
	"sync/atomic"
)

// goArena is the benchmarks' pure-Go baseline, built the way ztensor v1.19's ArenaPool is
// (the Go engine zarena is measured against): one mutex; a free list sorted by offset,
// searched best-fit by a linear scan, freed blocks inserted in order and merged with
// their neighbours; a bump offset; a map of overflow pointers looked up on every free;
// per-epoch counters kept with atomics. Like an arena over device memory it hands out
// addresses and never touches the memory. Free takes the size, as ztensor's does.
type goArena struct {
	mu       sync.Mutex
	base     uintptr
	capacity int
	offset   int
	floor    int
	free     []goSpan
	overflow map[uintptr]int

	hits, reuses, resets, epochAllocs, epochMax atomic.Int64
}

type goSpan struct{ offset, size int }

const goAlign = 256

func newGoArena(capacity int) *goArena {
	return &goArena{base: 1 << 40, capacity: capacity, overflow: map[uintptr]int{}}
}

func (g *goArena) alloc(n int) (uintptr, bool) {
	aligned := (n + goAlign - 1) &^ (goAlign - 1)
	g.epochAllocs.Add(1)
	for cur := g.epochMax.Load(); int64(aligned) > cur && !g.epochMax.CompareAndSwap(cur, int64(aligned)); cur = g.epochMax.Load() {
	}
	g.mu.Lock()
	if i := g.bestFit(aligned); i >= 0 {
		s := g.free[i]
		g.free = append(g.free[:i], g.free[i+1:]...)
		if rest := s.size - aligned; rest >= goAlign {
			g.insert(goSpan{s.offset + aligned, rest})
		}
		g.mu.Unlock()
		g.hits.Add(1)
		g.reuses.Add(1)
		return g.base + uintptr(s.offset), true
	}
	if g.offset+aligned <= g.capacity {
		p := g.base + uintptr(g.offset)
		g.offset += aligned
		g.mu.Unlock()
		g.hits.Add(1)
		return p, true
	}
	g.mu.Unlock()
	return 0, false
}

func (g *goArena) bestFit(n int) int {
	best, bestSize := -1, int(^uint(0)>>1)
	for i, s := range g.free {
		if s.size >= n && s.size < bestSize {
			best, bestSize = i, s.size
			if s.size == n {
				break
			}
		}
	}
	return best
}

func (g *goArena) insert(s goSpan) {
	i := sort.Search(len(g.free), func(i int) bool { return g.free[i].offset >= s.offset })
	g.free = append(g.free, goSpan{})
	copy(g.free[i+1:], g.free[i:])
	g.free[i] = s
	if i+1 < len(g.free) && g.free[i].offset+g.free[i].size == g.free[i+1].offset {
		g.free[i].size += g.free[i+1].size
		g.free = append(g.free[:i+1], g.free[i+2:]...)
	}
	if i > 0 && g.free[i-1].offset+g.free[i-1].size == g.free[i].offset {
		g.free[i-1].size += g.free[i].size
		g.free = append(g.free[:i], g.free[i+1:]...)
	}
}

func (g *goArena) freeBlock(p uintptr, n int) {
	g.mu.Lock()
	if _, ok := g.overflow[p]; ok {
		delete(g.overflow, p)
		g.mu.Unlock()
		return
	}
	g.mu.Unlock()
	aligned := (n + goAlign - 1) &^ (goAlign - 1)
	off := int(p - g.base)
	if off < 0 || off+aligned > g.capacity {
		return
	}
	g.mu.Lock()
	g.insert(goSpan{off, aligned})
	g.mu.Unlock()
}

func (g *goArena) reset() {
	g.mu.Lock()
	g.offset = g.floor
	g.free = g.free[:0]
	g.mu.Unlock()
	g.resets.Add(1)
	g.epochAllocs.Store(0)
	g.epochMax.Store(0)
}
