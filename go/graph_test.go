package zarena

import (
	"errors"
	"strings"
	"testing"
)

// Graph-stable steps through the Go binding (graph.go), on the host backend where a capture
// is a declared mode: the binding's own planned path serves the captured step at the eager
// steps' addresses, a deviation is refused (never served dynamically), replays count as
// steps and are refused in the wrong phase or over a live block, floors stay off the zone.

// One step: a = 64 KiB; b = 32 KiB; free a; c = 64 KiB (a's space); free b, c. grow: bytes
// added to c (a deviation).
func graphStep(t *testing.T, a *Arena, grow uint64) ([]DevicePtr, error) {
	t.Helper()
	pa, err := a.Alloc(64 << 10)
	if err != nil {
		return nil, err
	}
	pb, err := a.Alloc(32 << 10)
	if err != nil {
		return nil, err
	}
	if err := a.Free(pa); err != nil {
		t.Fatal(err)
	}
	pc, err := a.Alloc(64<<10 + grow)
	if err != nil {
		_ = a.FreeNow(pb, AnyEpoch)
		return nil, err
	}
	if err := a.Free(pb); err != nil {
		t.Fatal(err)
	}
	if err := a.Free(pc); err != nil {
		t.Fatal(err)
	}
	return []DevicePtr{pa, pb, pc}, nil
}

func graphReady(t *testing.T, a *Arena) {
	t.Helper()
	for i := 0; i < 12; i++ {
		if err := a.StepBegin(); err != nil {
			t.Fatal(err)
		}
		g, err := a.GraphInfo()
		if err != nil {
			t.Fatal(err)
		}
		if g.Ready {
			return
		}
		if _, err := graphStep(t, a, 0); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("the plan never became ready for a capture")
}

func TestGraphCaptureAndReplay(t *testing.T) {
	a := newPlanArena(t, "graphs", 0)
	if err := a.GraphCaptureBegin(); !errors.Is(err, ErrCaptureUnsafe) {
		t.Fatalf("a capture with no plan: %v, want ErrCaptureUnsafe", err)
	}
	graphReady(t, a)
	eager, err := graphStep(t, a, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.StepBegin(); err != nil {
		t.Fatal(err)
	}
	if err := a.GraphCaptureBegin(); err != nil {
		t.Fatal(err)
	}
	captured, err := graphStep(t, a, 0)
	if err != nil {
		t.Fatal(err)
	}
	g, err := a.GraphCaptureEnd(true)
	if err != nil || g == 0 {
		t.Fatalf("GraphCaptureEnd: %d, %v", g, err)
	}
	for i := range eager {
		if captured[i] != eager[i] {
			t.Fatalf("allocation %d: captured at %#x, eager at %#x", i, captured[i], eager[i])
		}
	}
	if err := a.GraphReplay(g); err != nil { // the first launch
		t.Fatal(err)
	}
	before := mustStats(t, a)
	for i := 0; i < 20; i++ {
		if err := a.GraphReplay(g); err != nil {
			t.Fatalf("replay %d: %v", i, err)
		}
	}
	after := mustStats(t, a)
	if after.PlanSteps != before.PlanSteps+20 || after.PlanHits != before.PlanHits {
		t.Fatalf("20 replays: plan steps %d -> %d, hits %d -> %d", before.PlanSteps,
			after.PlanSteps, before.PlanHits, after.PlanHits)
	}
	if err := a.MarkStepBoundary(); !errors.Is(err, ErrCaptureUnsafe) {
		t.Fatalf("a floor over the zone while a graph exists: %v", err)
	}
	// Eager steps go on under the same plan, at the same addresses.
	if err := a.StepBegin(); err != nil {
		t.Fatal(err)
	}
	again, err := graphStep(t, a, 0)
	if err != nil || again[2] != eager[2] {
		t.Fatalf("an eager step after the replays: %v, %v", again, err)
	}
	info, err := a.GraphInfo()
	if err != nil || info.Graphs != 1 || info.Replays != 20 || info.Period != 1 {
		t.Fatalf("GraphInfo %+v, %v", info, err)
	}
	if err := a.GraphRelease(g); err != nil {
		t.Fatal(err)
	}
	if err := a.GraphReplay(g); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a released graph replayed: %v", err)
	}
	if err := a.MarkStepBoundary(); err != nil {
		t.Fatal(err)
	}
}

func TestGraphCaptureRefusesADeviation(t *testing.T) {
	a := newPlanArena(t, "graphs", 0)
	graphReady(t, a)
	before := mustStats(t, a)
	if err := a.GraphCaptureBegin(); err != nil {
		t.Fatal(err)
	}
	_, err := graphStep(t, a, 256)
	if !errors.Is(err, ErrCaptureUnsafe) || !strings.Contains(err.Error(), "verdict=graph_capture") {
		t.Fatalf("a deviating allocation during a capture: %v", err)
	}
	if g, err := a.GraphCaptureEnd(true); g != 0 || !errors.Is(err, ErrCaptureUnsafe) {
		t.Fatalf("the deviating capture was kept: %d, %v", g, err)
	}
	if s := mustStats(t, a); s.Hits != before.Hits {
		t.Fatalf("the dynamic engine served during the capture: hits %d -> %d", before.Hits, s.Hits)
	}
	// Nothing else broke: the plan comes back and a capture works.
	graphReady(t, a)
	if err := a.GraphCaptureBegin(); err != nil {
		t.Fatal(err)
	}
	if _, err := graphStep(t, a, 0); err != nil {
		t.Fatal(err)
	}
	g, err := a.GraphCaptureEnd(true)
	if err != nil || g == 0 {
		t.Fatalf("a faithful capture after a refused one: %d, %v", g, err)
	}
	if err := a.GraphRelease(g); err != nil {
		t.Fatal(err)
	}
}
