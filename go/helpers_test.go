package zarena

import (
	"fmt"
	"sync"
	"testing"
)

const (
	kiB = 1 << 10
	miB = 1 << 20
)

// newHost creates a host-backend arena closed at the end of the test.
func newHost(t testing.TB, cfg Config) *Arena {
	t.Helper()
	return newHostShards(t, cfg, 0)
}

// newHostShards is newHost with that many free-queue shards (0: the default). One shard
// makes the order of frees and allocations exact: a test that asserts that the next Alloc
// reuses a block the goroutine just freed uses one, since with many the goroutine's
// shard follows its stack address, which the two calls may see on either side of a
// bucket edge.
func newHostShards(t testing.TB, cfg Config, shards int) *Arena {
	t.Helper()
	cfg.Backend = BackendHost
	if cfg.Name == "" {
		cfg.Name = t.Name()
	}
	a, err := newArena(cfg, shards)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return a
}

// mustAllocBlocks allocates count blocks of n bytes.
func mustAllocBlocks(t testing.TB, a *Arena, count int, n uint64) []Block {
	t.Helper()
	blocks := make([]Block, count)
	for i := range blocks {
		b, err := a.AllocBlock(n)
		if err != nil {
			t.Fatalf("AllocBlock(%d): %v", n, err)
		}
		blocks[i] = b
	}
	return blocks
}

func mustAlloc(t testing.TB, a *Arena, n uint64) DevicePtr {
	t.Helper()
	p, err := a.Alloc(n)
	if err != nil {
		t.Fatalf("Alloc(%d): %v", n, err)
	}
	return p
}

// mustReuseFreed allocates 4 KiB with alloc after p, a 4 KiB block that is not the top
// one, was freed: it must get p back, reused, and carry the free into C (one batch
// applied since before, queueCounts' batches). what names the calls in the message.
func mustReuseFreed(t testing.TB, a *Arena, p DevicePtr, before uint64, what string,
	alloc func(n uint64) (Block, error)) {
	t.Helper()
	b, err := alloc(4 * kiB)
	if err != nil {
		t.Fatal(err)
	}
	if b.Ptr != p || b.Flags&BlockReused == 0 {
		t.Fatalf("%s: %+v, want the freed block %#x reused", what, b, p)
	}
	if _, now := a.queueCounts(); now-before != 1 {
		t.Fatalf("%d batches applied, want 1", now-before)
	}
}

// recorder collects the records of one arena (the logger is process-wide; other
// tests' arenas must not disturb).
type recorder struct {
	mu    sync.Mutex
	arena string
	recs  []Record
}

func (r *recorder) log(rec Record) {
	if r.arena != "" && rec.Arena != r.arena {
		return
	}
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
}

// find and count first wait for the records emitted so far: delivery is asynchronous.
func (r *recorder) find(event string) (Record, bool) {
	FlushLogs()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.recs {
		if rec.Event == event {
			return rec, true
		}
	}
	return Record{}, false
}

// all returns every record so far (after a flush).
func (r *recorder) all() []Record {
	FlushLogs()
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Record(nil), r.recs...)
}

func (r *recorder) count(event string) int {
	FlushLogs()
	return r.arrived(event)
}

// arrived counts the records of event received so far, waiting for nothing.
func (r *recorder) arrived(event string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rec := range r.recs {
		if rec.Event == event {
			n++
		}
	}
	return n
}

// captureLogs routes the library's records of arena to a recorder for the test.
func captureLogs(t testing.TB, arena string, min Level) *recorder {
	t.Helper()
	r := &recorder{arena: arena}
	if err := SetLogger(r.log, min); err != nil {
		t.Fatalf("SetLogger: %v", err)
	}
	t.Cleanup(func() {
		if err := SetLogger(nil, LevelFromEnv()); err != nil {
			t.Errorf("SetLogger(nil, LevelFromEnv()): %v", err)
		}
	})
	return r
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// mustStats is a.Stats() for an arena that must be open.
func mustStats(t testing.TB, a *Arena) Stats {
	t.Helper()
	s, err := a.Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	return s
}
