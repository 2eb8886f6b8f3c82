package zarena

import (
	"errors"
	"sync"
	"testing"
)

// Two arenas of one name: every record reaches the pool of its arena through
// Record.Handle (the records of New, of the reporter thread's overflow reports and of
// Close alike), and a record that arrives after Close names the arena by ArenaID only.
func TestRecordsRouteToTheirArena(t *testing.T) {
	var mu sync.Mutex
	routed := map[*Arena][]Record{}
	orphans := []Record{}
	if err := SetLogger(func(r Record) {
		if r.Arena != "twin" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if r.Handle() == nil {
			orphans = append(orphans, r)
			return
		}
		routed[r.Handle()] = append(routed[r.Handle()], r)
	}, LevelDebug); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = SetLogger(nil, LevelFromEnv()) })
	cfg := Config{Name: "twin", CapacityBytes: 64 * kiB, OverflowPolicy: OverflowSync,
		OverflowLimitBytes: miB}
	a := newHost(t, cfg)
	b := newHost(t, cfg)
	if a.ID() == 0 || b.ID() <= a.ID() {
		t.Fatalf("ids %d, %d: want nonzero and increasing", a.ID(), b.ID())
	}
	p := mustAlloc(t, a, 128*kiB) // overflows: a's first_overflow (reporter thread)
	if err := a.Free(p); err != nil {
		t.Fatal(err)
	}
	FlushLogs()
	// b is closed during a capture: its memory waits, and the record that says it went
	// back arrives after Close returned.
	if err := CaptureBegin(CaptureProcess, 0); err != nil {
		t.Fatal(err)
	}
	ended := false
	t.Cleanup(func() {
		if !ended {
			_ = CaptureEnd(CaptureProcess, 0)
		}
	})
	bid := b.ID()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	ended = true
	if err := CaptureEnd(CaptureProcess, 0); err != nil {
		t.Fatal(err)
	}
	FlushLogs()

	mu.Lock()
	defer mu.Unlock()
	has := func(recs []Record, event string) bool {
		for _, r := range recs {
			if r.Event == event {
				return true
			}
		}
		return false
	}
	for h, recs := range routed {
		if h != a && h != b {
			t.Fatalf("a record routed to an arena of another test: %v", recs[0])
		}
		for _, r := range recs {
			if r.ArenaID != h.ID() {
				t.Errorf("%s: ArenaID %d, Handle's ID %d", r.Event, r.ArenaID, h.ID())
			}
		}
	}
	for _, want := range []string{"arena.config", "arena.first_overflow"} {
		if !has(routed[a], want) {
			t.Errorf("a's records lack %s: %v", want, routed[a])
		}
	}
	for _, want := range []string{"arena.config", "arena.destroy_deferred", "arena.destroy"} {
		if !has(routed[b], want) {
			t.Errorf("b's records lack %s (Close delivers them with Handle set): %v", want,
				routed[b])
		}
	}
	if has(routed[b], "arena.first_overflow") || has(routed[a], "arena.destroy") {
		t.Errorf("records crossed: a %v, b %v", routed[a], routed[b])
	}
	if len(orphans) != 1 || orphans[0].Event != "arena.released" || orphans[0].ArenaID != bid {
		t.Fatalf("after Close: %v, want one arena.released with ArenaID %d and no Handle",
			orphans, bid)
	}
}

func TestCaptureScopeCoversEveryArena(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 64 * kiB, OverflowPolicy: OverflowSync,
		OverflowLimitBytes: miB})
	if err := CaptureBegin(CaptureProcess, 0); err != nil {
		t.Fatal(err)
	}
	// Created during the capture: covered too.
	b := newHost(t, Config{CapacityBytes: 64 * kiB, OverflowPolicy: OverflowSync,
		OverflowLimitBytes: miB, Stream: 0x1000})
	for _, x := range []*Arena{a, b} {
		if _, err := x.Alloc(128 * kiB); !errors.Is(err, ErrCaptureUnsafe) {
			t.Errorf("SYNC overflow during a process capture: %v, want ErrCaptureUnsafe", err)
		}
	}
	if err := CaptureEnd(CaptureProcess, 0); err != nil {
		t.Fatal(err)
	}
	if err := CaptureEnd(CaptureProcess, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("an end without its begin: %v, want ErrInvalidArgument", err)
	}
	// A stream scope covers the arenas on that stream only.
	if err := CaptureBegin(CaptureStream, 0x1000); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Alloc(128 * kiB); !errors.Is(err, ErrCaptureUnsafe) {
		t.Errorf("b is on the captured stream: %v", err)
	}
	if p, err := a.Alloc(128 * kiB); err != nil {
		t.Errorf("a is on another stream: %v", err)
	} else if err := a.Free(p); err != nil {
		t.Error(err)
	}
	if err := CaptureEnd(CaptureStream, 0x1000); err != nil {
		t.Fatal(err)
	}
	if err := CaptureBegin(CaptureStream, 2); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("cudaStreamPerThread: %v, want ErrInvalidArgument", err)
	}
}
