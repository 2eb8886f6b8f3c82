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
	s := mustStats(t, a)
	if s.CapacityBytes != 4*miB {
		t.Fatalf("capacity %d, want %d", s.CapacityBytes, 4*miB)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// Every call that reaches the library says ErrClosed (StatusClosed), and only that.
	calls := map[string]func() error{
		"Alloc":            func() error { _, err := a.Alloc(1); return err },
		"AllocBlock":       func() error { _, err := a.AllocBlock(1); return err },
		"AllocTagged":      func() error { _, err := a.AllocTagged(1, 0); return err },
		"AllocBatch":       func() error { return a.AllocBatch([]uint64{1}, 0, make([]Block, 1)) },
		"Free":             func() error { return a.Free(0x1000) },
		"Free(0)":          func() error { return a.Free(0) },
		"FreeBlock":        func() error { return a.FreeBlock(Block{Ptr: 0x1000, Epoch: 0}) },
		"FreeNow":          func() error { return a.FreeNow(0x1000, AnyEpoch) },
		"Reset":            a.Reset,
		"MarkStepBoundary": a.MarkStepBoundary,
		"StepBegin":        a.StepBegin,
		"Stats":            func() error { _, err := a.Stats(); return err },
		"ResetPeakStats":   a.ResetPeakStats,
		"FormatStats":      func() error { _, err := a.FormatStats(FormatText); return err },
		"FormatLiveBlocks": func() error { _, err := a.FormatLiveBlocks(FormatJSON); return err },
		"LiveBlocks":       func() error { _, err := a.LiveBlocks(); return err },
		"Pin":              func() error { return a.Pin(0x1000) },
		"Unpin":            func() error { return a.Unpin(0x1000) },
		"SetFloor":         func() error { return a.SetFloor(0) },
		"RegionInfo":       func() error { _, err := a.RegionInfo(); return err },
		"Diagnose":         func() error { _, err := a.Diagnose(); return err },
		"SetCaptureActive": func() error { return a.SetCaptureActive(true) },
		"SetStream":        func() error { return a.SetStream(0) },
		"SetPoison":        func() error { return a.SetPoison(true, 0) },
		"inject":           func() error { return a.injectOverflowFault(1, 0, 0) },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, ErrClosed) || errors.Is(err, ErrInvalidArgument) ||
			StatusOf(err) != StatusClosed || !strings.Contains(err.Error(), "closed") {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
	if a.Epoch() != 0 || a.Backend() != -1 || len(a.FreeErrors()) != 0 {
		t.Fatalf("closed arena: epoch %d backend %v", a.Epoch(), a.Backend())
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
	if c := mustStats(t, a).CapacityBytes; c != 8*miB {
		t.Fatalf("zero Config capacity %d, want env's %d", c, 8*miB)
	}
	b := newHost(t, Config{CapacityBytes: 2 * miB, Alignment: 4096, Name: "named"})
	if c := mustStats(t, b).CapacityBytes; c != 2*miB {
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
	a := newHostShards(t, Config{CapacityBytes: 4 * miB}, 1)
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
	s := mustStats(t, a)
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
	if s := mustStats(t, a); s.Reuses != 1 || s.LiveAllocs != 2 {
		t.Fatalf("stats after reuse: %+v", s)
	}
}

func TestResetEpochAndStepBoundary(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 4 * miB})
	weights := mustAlloc(t, a, 64*kiB)
	if err := a.MarkStepBoundary(); err != nil {
		t.Fatalf("MarkStepBoundary: %v", err)
	}
	if s := mustStats(t, a); s.FloorBytes != 64*kiB {
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
	s := mustStats(t, a)
	if s.Resets != 3 || s.Epoch != 3 || s.UsedBytes != 64*kiB || s.LiveAllocs != 1 {
		t.Fatalf("stats after resets: %+v", s)
	}
	// Below the floor survives: freeing the weights is fine, not stale.
	if err := a.FreeNow(weights, AnyEpoch); err != nil {
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
	if err := a.FreeNow(inside, AnyEpoch); !errors.Is(err, ErrStale) {
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
	if a.Epoch() != 3 || mustStats(t, a).LiveAllocs != 0 {
		t.Fatalf("no reset after a panicking step: %+v", mustStats(t, a))
	}
}

func TestStepReportsResetError(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: miB})
	err := a.Step(func() error { return a.Close() })
	if !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), "closed") {
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
	if err := a.injectOverflowFault(1, 0, 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("got %v", err)
	}
}

// AllocBatch: one crossing that first applies the shard's queued frees, then allocates
// every size; a size that fails leaves a zero Block and the error is the first failure's,
// the sizes after it are still served.
func TestAllocBatch(t *testing.T) {
	a := newHostShards(t, Config{CapacityBytes: miB, OverflowPolicy: OverflowRefuse}, 1)
	p := mustAlloc(t, a, 4*kiB)
	mustAlloc(t, a, kiB)
	if err := a.Free(p); err != nil {
		t.Fatal(err)
	}
	tag, err := RegisterTag("batch." + t.Name())
	if err != nil {
		t.Fatal(err)
	}
	sizes := []uint64{4 * kiB, 100, 2 * miB, 0, 300}
	blocks := make([]Block, len(sizes)+1)
	blocks[len(sizes)] = Block{Ptr: 1} // beyond the sizes: untouched
	err = a.AllocBatch(sizes, tag, blocks)
	if !errors.Is(err, ErrOutOfMemory) || !strings.Contains(err.Error(), "item 2") {
		t.Fatalf("AllocBatch with a size that cannot fit: %v", err)
	}
	if blocks[0].Ptr != p || blocks[0].Flags&BlockReused == 0 {
		t.Fatalf("the queued free was not applied first: %+v (freed %#x)", blocks[0], p)
	}
	want := []uint64{4 * kiB, 256, 0, 0, 512}
	for i, b := range blocks[:len(sizes)] {
		if b.Size != want[i] || (b.Ptr != 0) != (want[i] != 0) || (b.Ptr != 0 && b.Tag != tag) {
			t.Errorf("block %d: %+v, want %d bytes tagged %d", i, b, want[i], tag)
		}
	}
	if blocks[len(sizes)].Ptr != 1 {
		t.Fatal("AllocBatch wrote past the sizes")
	}
	if s := mustStats(t, a); s.LiveAllocs != 1+3 {
		t.Fatalf("live %d, want the 1 KiB block and the 3 served", s.LiveAllocs)
	}
	if err := a.AllocBatch(sizes, 0, blocks[:2]); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("5 sizes, room for 2: %v", err)
	}
	if err := a.AllocBatch(nil, 0, nil); err != nil {
		t.Fatalf("no sizes: %v", err)
	}
	if s := mustStats(t, a); s.LiveAllocs != 4 {
		t.Fatalf("a refused batch allocated: live %d", s.LiveAllocs)
	}
}
