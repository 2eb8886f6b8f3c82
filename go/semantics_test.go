package zarena

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/zarena/zarena/go/internal/cgotest"
)

func TestAllocBlockCarriesEpochSizeFlags(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 4 * miB})
	b, err := a.AllocBlock(1000)
	if err != nil {
		t.Fatal(err)
	}
	if b.Ptr == 0 || b.Epoch != 0 || b.Size != 1024 || b.Flags != 0 || b.Tag != 0 {
		t.Fatalf("first block %+v", b)
	}
	if err := a.Reset(); err != nil {
		t.Fatal(err)
	}
	c, err := a.AllocBlock(1)
	if err != nil {
		t.Fatal(err)
	}
	if c.Epoch != 1 || a.Epoch() != 1 || c.Size != 256 {
		t.Fatalf("after a reset: %+v, Epoch() %d", c, a.Epoch())
	}
	// The old block's address was handed out again: FreeNow with the old epoch must not
	// free the new block.
	if c.Ptr != b.Ptr {
		t.Fatalf("address not reused (%#x vs %#x): the check below proves nothing", c.Ptr, b.Ptr)
	}
	if err := a.FreeNow(b.Ptr, b.Epoch); !errors.Is(err, ErrStale) {
		t.Fatalf("FreeNow with the previous epoch: %v, want ErrStale", err)
	}
	if s := mustStats(t, a); s.LiveAllocs != 1 || s.StaleFrees != 1 {
		t.Fatalf("the stale free changed state: %+v", s)
	}
	if err := a.FreeNow(c.Ptr, c.Epoch); err != nil {
		t.Fatal(err)
	}
}

func TestDevicePtrPointer(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: miB})
	p := mustAlloc(t, a, 64)
	u := p.Pointer()
	if uintptr(u) != uintptr(p) {
		t.Fatalf("Pointer() = %p, want %#x", u, p)
	}
	*(*uint32)(u) = 0xdeadbeef // host backend: Go may read and write it
	if got := *(*uint32)(unsafe.Add(DevicePtr(p).Pointer(), 0)); got != 0xdeadbeef {
		t.Fatalf("read back %#x", got)
	}
}

// Save for backward: a pinned activation survives a reset with its bytes, and the
// arena never hands its space out while it is pinned.
func TestPinAcrossReset(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 4 * miB})
	act, err := a.AllocBlock(64 * kiB)
	if err != nil {
		t.Fatal(err)
	}
	cgotest.Tag(uintptr(act.Ptr), act.Size, 0xA7)
	mustAlloc(t, a, 128*kiB) // scratch above it
	if err := a.Pin(act.Ptr); err != nil {
		t.Fatal(err)
	}
	if s := mustStats(t, a); s.PinnedBlocks != 1 || s.PinnedBytes != act.Size {
		t.Fatalf("pinned stats %+v", s)
	}
	for i := 0; i < 3; i++ {
		if err := a.Reset(); err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 20; j++ {
			b, err := a.AllocBlock(16 * kiB)
			if err != nil {
				t.Fatal(err)
			}
			if b.Ptr < act.Ptr+DevicePtr(act.Size) && act.Ptr < b.Ptr+DevicePtr(b.Size) {
				t.Fatalf("reset %d: block %+v overlaps the pinned activation %+v", i, b, act)
			}
			cgotest.Tag(uintptr(b.Ptr), b.Size, 0x11)
		}
	}
	if !cgotest.Check(uintptr(act.Ptr), act.Size, 0xA7) {
		t.Fatal("the pinned activation's bytes changed across resets")
	}
	// Freed while pinned: deferred to the last unpin.
	if err := a.FreeNow(act.Ptr, AnyEpoch); err != nil {
		t.Fatal(err)
	}
	if s := mustStats(t, a); s.DeferredFrees != 1 {
		t.Fatalf("deferred_frees %d", s.DeferredFrees)
	}
	if err := a.Unpin(act.Ptr); err != nil {
		t.Fatal(err)
	}
	if err := a.Unpin(act.Ptr); !errors.Is(err, ErrDoubleFree) {
		t.Fatalf("Unpin of a freed block: %v", err)
	}
	if s := mustStats(t, a); s.PinnedBlocks != 0 || s.DeferredFrees != 0 {
		t.Fatalf("after the last unpin: %+v", s)
	}
}

func TestPinAfterQueuedFreeSeesTheFree(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: miB})
	p := mustAlloc(t, a, kiB)
	mustAlloc(t, a, kiB)
	if err := a.Free(p); err != nil {
		t.Fatal(err)
	}
	if err := a.Pin(p); !errors.Is(err, ErrDoubleFree) {
		t.Fatalf("Pin after Free: %v, want ErrDoubleFree (the queued free applied first)", err)
	}
}

// "Not pinned" and "too many pins" are errors of their own, not ErrInvalidArgument, and
// change nothing.
func TestPinErrorsHaveTheirOwnStatus(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: miB})
	p := mustAlloc(t, a, kiB)
	err := a.Unpin(p)
	if !errors.Is(err, ErrNotPinned) || errors.Is(err, ErrInvalidArgument) ||
		StatusOf(err) != StatusNotPinned || !strings.Contains(err.Error(), "not pinned") {
		t.Fatalf("Unpin of a block without pins: %v, want ErrNotPinned", err)
	}
	for i := 0; i < 65535; i++ {
		if err := a.Pin(p); err != nil {
			t.Fatalf("pin %d: %v", i+1, err)
		}
	}
	err = a.Pin(p)
	if !errors.Is(err, ErrTooManyPins) || StatusOf(err) != StatusTooManyPins ||
		!strings.Contains(err.Error(), "65535 pins") {
		t.Fatalf("the 65536th pin: %v, want ErrTooManyPins", err)
	}
	if s := mustStats(t, a); s.PinnedBlocks != 1 || s.LiveAllocs != 1 {
		t.Fatalf("the refused pin changed state: %+v", s)
	}
}

func TestBaseAndCapacityWithoutACall(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 4 * miB})
	r, err := a.RegionInfo()
	if err != nil {
		t.Fatal(err)
	}
	if a.Base() != r.Base || a.Base() == 0 || a.CapacityBytes() != r.CapacityBytes {
		t.Fatalf("Base %#x, CapacityBytes %d; RegionInfo %+v", a.Base(), a.CapacityBytes(), r)
	}
	p := mustAlloc(t, a, kiB)
	if uintptr(p) < uintptr(a.Base()) || uint64(uintptr(p)-uintptr(a.Base())) >= a.CapacityBytes() {
		t.Fatalf("a region block %#x outside [Base, Base+CapacityBytes)", p)
	}
}

// A view (an address inside a block) pins and unpins its block.
func TestPinOfAViewPinsItsBlock(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: miB})
	p := mustAlloc(t, a, 64*kiB)
	if err := a.Pin(p + 1000); err != nil {
		t.Fatal(err)
	}
	if err := a.Reset(); err != nil {
		t.Fatal(err)
	}
	if s := mustStats(t, a); s.PinnedBlocks != 1 || s.PinnedBytes != 64*kiB || s.LiveAllocs != 1 {
		t.Fatalf("the view's block is not the one pinned: %+v", s)
	}
	if err := a.Unpin(p + 64*kiB - 1); err != nil {
		t.Fatal(err)
	}
	if err := a.Unpin(p); !errors.Is(err, ErrNotPinned) {
		t.Fatalf("a second Unpin: %v, want ErrNotPinned", err)
	}
	if err := a.Pin(p + 64*kiB + 512); !errors.Is(err, ErrNotOwned) {
		t.Fatalf("Pin past the block's end: %v, want ErrNotOwned", err)
	}
}

func TestSetFloorAndRegionInfo(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 4 * miB})
	w := mustAlloc(t, a, 64*kiB)
	x := mustAlloc(t, a, 64*kiB)
	r, err := a.RegionInfo()
	if err != nil {
		t.Fatal(err)
	}
	if r.Base != w || r.CapacityBytes != 4*miB || r.TopBytes != 128*kiB || r.FloorBytes != 0 ||
		r.CommittedBytes != 4*miB || r.Managed || r.Expandable {
		t.Fatalf("RegionInfo %+v (first block %#x)", r, w)
	}
	if err := a.SetFloor(64 * kiB); err != nil { // w below, x above
		t.Fatal(err)
	}
	if r, _ := a.RegionInfo(); r.FloorBytes != 64*kiB {
		t.Fatalf("floor %d", r.FloorBytes)
	}
	if err := a.SetFloor(32 * kiB); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("SetFloor inside a block: %v", err)
	}
	if err := a.Reset(); err != nil {
		t.Fatal(err)
	}
	if err := a.FreeNow(x, AnyEpoch); !errors.Is(err, ErrStale) {
		t.Fatalf("block above the floor after a reset: %v", err)
	}
	if err := a.FreeNow(w, AnyEpoch); err != nil {
		t.Fatalf("block below the floor after a reset: %v", err)
	}
}

func TestContainsWithoutACall(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: miB, OverflowPolicy: OverflowSync})
	p := mustAlloc(t, a, 768*kiB)
	r, _ := a.RegionInfo()
	over := mustAlloc(t, a, 512*kiB) // overflow: outside the region
	cases := []struct {
		p    DevicePtr
		want bool
	}{{p, true}, {r.Base + miB - 1, true}, {r.Base + miB, false}, {r.Base - 1, false}, {0, false},
		{over, false}}
	for _, c := range cases {
		if got := a.Contains(c.p); got != c.want {
			t.Errorf("Contains(%#x) = %v, want %v", c.p, got, c.want)
		}
	}
	if s := mustStats(t, a); s.OverflowAllocs != 1 {
		t.Fatalf("the 512 KiB block did not overflow: %+v", s)
	}
}

func TestCaptureActiveRefusesSyncOverflow(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: miB, OverflowPolicy: OverflowSync})
	mustAlloc(t, a, 768*kiB)
	if err := a.SetCaptureActive(true); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Alloc(512 * kiB); !errors.Is(err, ErrCaptureUnsafe) {
		t.Fatalf("SYNC overflow during a capture: %v, want ErrCaptureUnsafe", err)
	}
	if err := a.SetCaptureActive(false); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Alloc(512 * kiB); err != nil {
		t.Fatalf("after the capture: %v", err)
	}
}

func TestSetStreamOnHost(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: miB})
	if err := a.SetStream(0); err != nil {
		t.Fatalf("SetStream(legacy): %v", err)
	}
}

// Poison from Go: a stale tensor read after its free holds NaN.
func TestSetPoisonFillsFreedBlocksWithNaN(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: miB})
	if err := a.SetPoison(true, 0); err != nil {
		t.Fatal(err)
	}
	p := mustAlloc(t, a, kiB)
	mustAlloc(t, a, kiB)
	f := unsafe.Slice((*float32)(p.Pointer()), 256)
	for i := range f {
		f[i] = 1.5
	}
	if err := a.Free(p); err != nil {
		t.Fatal(err)
	}
	for i, v := range f { // filled before Free returned

		if !math.IsNaN(float64(v)) {
			t.Fatalf("element %d of the freed block = %v, want NaN", i, v)
		}
	}
	if math.Float32bits(f[0]) != DefaultPoisonWord {
		t.Fatalf("poison word %#x", math.Float32bits(f[0]))
	}
	if s := mustStats(t, a); s.PoisonFills == 0 {
		t.Fatalf("poison_fills 0")
	}
	if err := a.SetPoison(false, 0); err != nil {
		t.Fatal(err)
	}
	q := mustAlloc(t, a, kiB)
	g := unsafe.Slice((*float32)(q.Pointer()), 256)
	g[0] = 2.5
	if err := a.FreeNow(q, AnyEpoch); err != nil {
		t.Fatal(err)
	}
	if g[0] != 2.5 {
		t.Fatalf("poison off, yet the freed block was filled: %v", g[0])
	}
}

// Step marks each step (zarena_step_begin): seen in the trace, whose events zarena-replay
// counts. Needs the build's zarena-replay (ZTEST_BUILD_DIR, set by scripts/go-test.sh).
func TestStepCallsStepBegin(t *testing.T) {
	build := os.Getenv("ZTEST_BUILD_DIR")
	replay := filepath.Join(build, "tools", "zarena_replay", "zarena-replay")
	if _, err := os.Stat(replay); build == "" || err != nil {
		t.Skip("zarena-replay not found (run through scripts/go-test.sh)")
	}
	events := func(step bool) float64 {
		trace := filepath.Join(t.TempDir(), "steps.trace")
		a, err := New(Config{Backend: BackendHost, CapacityBytes: 4 * miB, TraceFile: trace})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			work := func() error { _, err := a.Alloc(kiB); return err }
			if step {
				err = a.Step(work)
			} else if err = work(); err == nil {
				err = a.Reset()
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		report := filepath.Join(t.TempDir(), "report.json")
		if out, err := exec.Command(replay, "-q", "--json", report, trace).CombinedOutput(); err != nil {
			t.Fatalf("zarena-replay: %v\n%s", err, out)
		}
		var doc struct{ Events float64 }
		raw, _ := os.ReadFile(report)
		if err := json.Unmarshal(raw, &doc); err != nil || doc.Events == 0 {
			t.Fatalf("report %s: %v", raw, err)
		}
		return doc.Events
	}
	if with, without := events(true), events(false); with-without != 3 {
		t.Fatalf("trace events with Step %v, with Alloc+Reset %v: want 3 step-begin events more",
			with, without)
	}
	a := newHost(t, Config{CapacityBytes: miB})
	_ = a.Close()
	if err := a.StepBegin(); !errors.Is(err, ErrClosed) {
		t.Fatalf("StepBegin after Close: %v", err)
	}
}

// Steps that keep a block each and never reset: Diagnose says never_reset before the
// overflow, and the failed allocation's error carries the same verdict and advice.
func TestDiagnoseNeverReset(t *testing.T) {
	captureLogs(t, t.Name(), LevelWarn)
	a := newHost(t, Config{CapacityBytes: 4 * miB, OverflowPolicy: OverflowRefuse})
	d, err := a.Diagnose()
	if err != nil || d.Verdict != "ok" || d.Advice != "" {
		t.Fatalf("fresh arena: %+v, %v", d, err)
	}
	for i := 0; i < 3; i++ {
		if err := a.StepBegin(); err != nil {
			t.Fatal(err)
		}
		mustAlloc(t, a, 256*kiB)
	}
	d, err = a.Diagnose()
	if err != nil || d.Verdict != "never_reset" || !d.Warned || !d.StepsExplicit || d.Steps != 3 ||
		d.KeptBytes == 0 || !strings.Contains(d.Advice, "zarena_reset") {
		t.Fatalf("after 3 steps: %+v, %v", d, err)
	}
	var allocErr error
	for allocErr == nil {
		if err := a.StepBegin(); err != nil {
			t.Fatal(err)
		}
		_, allocErr = a.Alloc(256 * kiB)
	}
	v, adv := DiagnosisOf(allocErr)
	if v != "never_reset" || !strings.Contains(adv, "zarena_reset") {
		t.Fatalf("the error %v carries %q, %q", allocErr, v, adv)
	}
	d, _ = a.Diagnose()
	if !d.Overflowed || d.Verdict != "never_reset" || d.OverflowEpochs != 1 || d.NeededBytes == 0 {
		t.Fatalf("after the overflow: %+v", d)
	}
	if st := mustStats(t, a); st.OverflowEpochs != 1 || st.Steps < 4 {
		t.Fatalf("stats %+v", st)
	}
}
