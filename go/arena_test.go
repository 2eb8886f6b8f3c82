package zarena

import (
	"errors"
	"strings"
	"testing"
)

func TestNewDefaultsAndClose(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 4 * miB})
	if got := a.Backend(); got != BackendHost {
		t.Fatalf("Backend() = %v, want host", got)
	}
	if a.Name() != t.Name() {
		t.Fatalf("Name() = %q", a.Name())
	}
	s := a.Stats()
	if s.CapacityBytes != 4*miB {
		t.Fatalf("capacity %d, want %d", s.CapacityBytes, 4*miB)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := a.Alloc(1); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Alloc after Close: %v, want ErrInvalidArgument", err)
	}
	if err := a.Free(0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Free after Close: %v", err)
	}
	if err := a.Reset(); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Reset after Close: %v", err)
	}
	if err := a.MarkStepBoundary(); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("MarkStepBoundary after Close: %v", err)
	}
	if a.Epoch() != 0 || a.Backend() != -1 || a.Stats() != (Stats{}) {
		t.Fatalf("closed arena: epoch %d backend %v stats %+v", a.Epoch(), a.Backend(), a.Stats())
	}
	if _, err := a.StatsErr(); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("StatsErr after Close: %v", err)
	}
	var nilArena *Arena
	if err := nilArena.Close(); err != nil {
		t.Fatalf("nil Close: %v", err)
	}
}

func TestConfigFieldsReachTheLibrary(t *testing.T) {
	t.Setenv("ZARENA_CAPACITY_BYTES", "8388608")
	def := DefaultConfig()
	if def.CapacityBytes != 8*miB {
		t.Fatalf("DefaultConfig ignores the environment: capacity %d", def.CapacityBytes)
	}
	// The zero value keeps the environment's capacity; a set field wins.
	a := newHost(t, Config{})
	if c := a.Stats().CapacityBytes; c != 8*miB {
		t.Fatalf("zero Config capacity %d, want env's %d", c, 8*miB)
	}
	b := newHost(t, Config{CapacityBytes: 2 * miB, Alignment: 4096, Name: "named"})
	if c := b.Stats().CapacityBytes; c != 2*miB {
		t.Fatalf("capacity %d", c)
	}
	p := mustAlloc(t, b, 1)
	q := mustAlloc(t, b, 1)
	if p%4096 != 0 || q%4096 != 0 || q-p != 4096 {
		t.Fatalf("alignment 4096 not applied: %#x %#x", p, q)
	}
	if b.Name() != "named" {
		t.Fatalf("name %q", b.Name())
	}
}

func TestAllocFreeReuse(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 4 * miB})
	if p, err := a.Alloc(0); err != nil || p != 0 {
		t.Fatalf("Alloc(0) = %#x, %v", p, err)
	}
	if err := a.Free(0); err != nil {
		t.Fatalf("Free(0): %v", err)
	}
	p := mustAlloc(t, a, 1000)
	q := mustAlloc(t, a, 1000)
	if p == 0 || q == 0 || p%256 != 0 || q%256 != 0 || p == q {
		t.Fatalf("bad pointers %#x %#x", p, q)
	}
	s := a.Stats()
	if s.LiveAllocs != 2 || s.UsedBytes != 2048 || s.Hits != 2 || s.EpochAllocs != 2 {
		t.Fatalf("stats after 2 allocs: %+v", s)
	}
	if err := a.Free(p); err != nil {
		t.Fatalf("Free: %v", err)
	}
	r := mustAlloc(t, a, 512)
	if r != p {
		t.Fatalf("freed block not reused: got %#x, want %#x", r, p)
	}
	if s := a.Stats(); s.Reuses != 1 || s.LiveAllocs != 2 {
		t.Fatalf("stats after reuse: %+v", s)
	}
}

func TestResetEpochAndStepBoundary(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 4 * miB})
	weights := mustAlloc(t, a, 64*kiB)
	if err := a.MarkStepBoundary(); err != nil {
		t.Fatalf("MarkStepBoundary: %v", err)
	}
	if s := a.Stats(); s.FloorBytes != 64*kiB {
		t.Fatalf("floor %d after mark", s.FloorBytes)
	}
	for i := uint64(1); i <= 3; i++ {
		mustAlloc(t, a, 100*kiB)
		if err := a.Reset(); err != nil {
			t.Fatalf("Reset: %v", err)
		}
		if a.Epoch() != i {
			t.Fatalf("Epoch() = %d, want %d", a.Epoch(), i)
		}
	}
	s := a.Stats()
	if s.Resets != 3 || s.Epoch != 3 || s.UsedBytes != 64*kiB || s.LiveAllocs != 1 {
		t.Fatalf("stats after resets: %+v", s)
	}
	// Below the floor survives: freeing the weights is fine, not stale.
	if err := a.FreeNow(weights); err != nil {
		t.Fatalf("Free(weights) after resets: %v", err)
	}
}

func TestStepResetsAfterErrorAndPanic(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 4 * miB})
	var inside DevicePtr
	err := a.Step(func() error {
		inside = mustAlloc(t, a, kiB)
		return nil
	})
	if err != nil || a.Epoch() != 1 {
		t.Fatalf("Step: err %v epoch %d", err, a.Epoch())
	}
	if err := a.FreeNow(inside); !errors.Is(err, ErrStale) {
		t.Fatalf("block of a finished step: %v, want ErrStale", err)
	}
	boom := errors.New("boom")
	if err := a.Step(func() error { mustAlloc(t, a, kiB); return boom }); !errors.Is(err, boom) {
		t.Fatalf("Step error %v, want boom", err)
	}
	if a.Epoch() != 2 {
		t.Fatalf("no reset after a failed step: epoch %d", a.Epoch())
	}
	func() {
		defer func() {
			if p := recover(); p != "step panic" {
				t.Fatalf("recovered %v", p)
			}
		}()
		_ = a.Step(func() error { mustAlloc(t, a, kiB); panic("step panic") })
	}()
	if a.Epoch() != 3 || a.Stats().LiveAllocs != 0 {
		t.Fatalf("no reset after a panicking step: %+v", a.Stats())
	}
}

func TestStepReportsResetError(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: miB})
	err := a.Step(func() error { return a.Close() })
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("Step on an arena closed inside: %v", err)
	}
}

func TestVersion(t *testing.T) {
	s, n := Version()
	if n != HeaderVersion {
		t.Fatalf("library %s (%d) does not match the header (%d)", s, n, HeaderVersion)
	}
	want := []byte{byte('0' + n/10000), '.'}
	if !strings.HasPrefix(s, string(want)) {
		t.Fatalf("version string %q vs number %d", s, n)
	}
}

func TestInjectOverflowFaultOnClosedArena(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: miB})
	_ = a.Close()
	if err := a.InjectOverflowFault(1, 0, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("got %v", err)
	}
}
