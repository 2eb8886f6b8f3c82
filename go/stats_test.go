package zarena

import (
	"encoding/json"
	"errors"
	"expvar"
	"reflect"
	"testing"
)

// Stats' JSON keys are the C field names, every one of them, in struct order.
func TestStatsJSONKeysAreTheCFieldNames(t *testing.T) {
	want := []string{"capacity_bytes", "used_bytes", "floor_bytes", "high_water_bytes", "epoch",
		"epoch_allocs", "epoch_max_alloc_bytes", "epoch_high_water_bytes", "hits", "misses",
		"reuses", "resets", "free_list_len", "free_list_bytes", "largest_free_block_bytes",
		"live_allocs", "stale_frees", "invalid_frees", "overflow_allocs", "overflow_live_bytes",
		"overflow_peak_bytes", "overflow_max_latency_ns", "overflow_reclaimed",
		"overflow_failures", "pinned_bytes", "pinned_blocks", "pin_retained_bytes",
		"deferred_frees", "overflow_deferred_gives", "poison_fills", "poison_skipped",
		"top_bytes", "committed_bytes", "commit_events", "trim_events", "commit_failures",
		"steps", "epoch_steps", "overflow_epochs", "overflow_records", "overflow_summaries",
		"needed_bytes", "used_peak_bytes"}
	st := reflect.TypeOf(Stats{})
	if st.NumField() != len(want) {
		t.Fatalf("Stats has %d fields, zarena_stats %d", st.NumField(), len(want))
	}
	for i := range want {
		if got := st.Field(i).Tag.Get("json"); got != want[i] {
			t.Errorf("field %d (%s): json key %q, want %q", i, st.Field(i).Name, got, want[i])
		}
	}
}

func TestStats11Fields(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 4 * miB})
	p := mustAlloc(t, a, 64*kiB)
	mustAlloc(t, a, 64*kiB)
	if err := a.Pin(p); err != nil {
		t.Fatal(err)
	}
	if err := a.Reset(); err != nil {
		t.Fatal(err)
	}
	s := mustStats(t, a)
	if s.PinnedBytes != 64*kiB || s.PinnedBlocks != 1 || s.TopBytes != 64*kiB ||
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
