package zarena

import (
	"encoding/json"
	"errors"
	"expvar"
	"testing"
)

// A pin held across a reset shows in the pin and region counters (the keys and values of
// every field against the library's own JSON: format_test.go).
func TestStats11Fields(t *testing.T) {
	const block = 64 * kiB
	a := newHost(t, Config{CapacityBytes: 4 * miB})
	p := mustAlloc(t, a, block)
	mustAlloc(t, a, block)
	if err := a.Pin(p); err != nil {
		t.Fatal(err)
	}
	if err := a.Reset(); err != nil {
		t.Fatal(err)
	}
	s := mustStats(t, a)
	if s.PinnedBytes != block || s.PinnedBlocks != 1 || s.TopBytes != block ||
		s.CommittedBytes != 4*miB {
		t.Fatalf("1.1 stats: %+v", s)
	}
}

func TestPublishExpvar(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 2 * miB})
	mustAlloc(t, a, 3*kiB)
	name := "zarena." + t.Name()
	if err := a.PublishExpvar(name); err != nil {
		t.Fatal(err)
	}
	var got map[string]uint64
	if err := json.Unmarshal([]byte(expvar.Get(name).String()), &got); err != nil {
		t.Fatal(err)
	}
	if got["capacity_bytes"] != 2*miB || got["used_bytes"] != 3*kiB || got["live_allocs"] != 1 {
		t.Fatalf("expvar %v", got)
	}
	mustAlloc(t, a, kiB) // a fresh snapshot at every read
	_ = json.Unmarshal([]byte(expvar.Get(name).String()), &got)
	if got["live_allocs"] != 2 {
		t.Fatalf("expvar not refreshed: %v", got)
	}
	if err := a.PublishExpvar(name); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("publishing twice: %v", err)
	}
}
