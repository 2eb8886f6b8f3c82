package main

import (
	"errors"
	"fmt"
	"unsafe"

	zarena "github.com/zarena/zarena/go"
)

// Part 8: a graph-stable step (zarena/zarena_graph.h). Under a step plan every step has the
// same addresses, so a step captured once replays in the plan's own memory, with no pool
// of its own. On the host backend a capture is a declared mode and the "graph" is what a
// CUDA graph is: the step's kernels recorded with the addresses they were given, run
// again by each launch. The engine checks that every replayed step computes what an eager
// step computes, that the captured step got the eager steps' addresses, and that a step
// that differs from the plan is refused during a capture instead of baking a dynamic
// address into the graph.

// recorder runs a kernel at once (eager) or records it for the graph's launches.
type recorder struct {
	capturing bool
	graph     []func()
}

func (r *recorder) kernel(k func()) {
	if r.capturing {
		r.graph = append(r.graph, k)
		return
	}
	k()
}

func (r *recorder) launch() {
	for _, k := range r.graph {
		k()
	}
}

func floats(b zarena.Block) []float32 {
	return unsafe.Slice((*float32)(b.Ptr.Pointer()), b.Size/4)
}

// graphStep is one training-like step: x = input + seed; h = relu(x * w); y = h * w;
// acc += y. x, h and y are the step's own blocks (planned once the plan is engaged); the
// input, the weights and the accumulator live below the floor. grow adds to y's request
// (a step that differs from the plan).
func graphStep(a *zarena.Arena, r *recorder, in, w, acc zarena.Block, grow uint64) ([]zarena.DevicePtr, error) {
	const bytes = 4 * n
	x, err := a.AllocBlock(bytes)
	if err != nil {
		return nil, err
	}
	r.kernel(func() {
		xs, is := floats(x), floats(in)
		for i := range xs {
			xs[i] = is[i] + is[n]
		}
	})
	h, err := a.AllocBlock(bytes)
	if err != nil {
		return nil, err
	}
	r.kernel(func() {
		hs, xs, ws := floats(h), floats(x), floats(w)
		for i := range hs {
			if hs[i] = xs[i] * ws[i]; hs[i] < 0 {
				hs[i] = 0
			}
		}
	})
	if err := a.Free(x.Ptr); err != nil {
		return nil, err
	}
	y, err := a.AllocBlock(bytes + grow)
	if err != nil {
		_ = a.FreeNow(h.Ptr, zarena.AnyEpoch)
		return nil, err
	}
	r.kernel(func() {
		ys, hs, ws, as := floats(y), floats(h), floats(w), floats(acc)
		for i := 0; i < n; i++ {
			ys[i] = hs[i] * ws[i]
			as[i] += ys[i]
		}
	})
	if err := a.Free(h.Ptr); err != nil {
		return nil, err
	}
	if err := a.Free(y.Ptr); err != nil {
		return nil, err
	}
	return []zarena.DevicePtr{x.Ptr, h.Ptr, y.Ptr}, nil
}

// graphRun runs `steps` steps and returns the accumulator's sum: every step eager, or
// (useGraph) eager until the plan is ready, a capture that differs from the plan (refused),
// eager steps again, then the step captured once and replayed for every later step.
func graphRun(steps int, useGraph bool) (float64, error) {
	a, err := zarena.New(zarena.Config{Backend: zarena.BackendHost, CapacityBytes: 8 << 20,
		Name: "graphs", OverflowPolicy: zarena.OverflowRefuse, Flags: zarena.FlagPlan | zarena.FlagNoResets,
		ClearFlags: zarena.FlagPoison})
	if err != nil {
		return 0, err
	}
	defer a.Close()
	in, err := a.AllocBlock(4 * (n + 1)) // the step's input and seed, set before each step
	if err != nil {
		return 0, err
	}
	w, err := a.AllocBlock(4 * n)
	if err != nil {
		return 0, err
	}
	acc, err := a.AllocBlock(4 * n)
	if err != nil {
		return 0, err
	}
	ins, ws, as := floats(in), floats(w), floats(acc)
	for i := 0; i < n; i++ {
		ins[i], ws[i], as[i] = float32(i%13), 0.5, 0
	}
	if err := a.MarkStepBoundary(); err != nil { // input, weights, accumulator stay
		return 0, err
	}
	r := &recorder{}
	var g uint32
	var eager []zarena.DevicePtr
	refused, replays := false, 0
	for step := 0; step < steps; step++ {
		if err := a.StepBegin(); err != nil {
			return 0, err
		}
		ins[n] = float32(step % 5)
		if g != 0 { // a replay: checked and counted by the arena, then launched
			if err := a.GraphReplay(g); err != nil {
				return 0, err
			}
			r.launch()
			replays++
			continue
		}
		info, err := a.GraphInfo()
		if err != nil {
			return 0, err
		}
		if useGraph && info.Ready && !refused {
			// A captured step that differs from the plan (y larger): refused, so no address
			// outside the plan gets into a graph. The capture recorded and ran nothing.
			if err := a.GraphCaptureBegin(); err != nil {
				return 0, err
			}
			r.capturing = true
			_, serr := graphStep(a, r, in, w, acc, 256)
			r.capturing, r.graph = false, nil
			id, cerr := a.GraphCaptureEnd(true)
			if !errors.Is(serr, zarena.ErrCaptureUnsafe) || id != 0 || !errors.Is(cerr, zarena.ErrCaptureUnsafe) {
				return 0, fmt.Errorf("a differing captured step: %v; capture end %d, %v", serr, id, cerr)
			}
			fmt.Printf("a captured step that differs from the plan: %v (refused, no graph kept)\n",
				zarena.StatusOf(serr))
			refused = true
		} else if useGraph && info.Ready {
			if err := a.GraphCaptureBegin(); err != nil {
				return 0, err
			}
			r.capturing = true
			got, err := graphStep(a, r, in, w, acc, 0)
			r.capturing = false
			if err != nil {
				return 0, err
			}
			if g, err = a.GraphCaptureEnd(true); err != nil {
				return 0, err
			}
			for i := range got {
				if got[i] != eager[i] {
					return 0, fmt.Errorf("captured block %d at %#x, the eager steps' at %#x", i, got[i], eager[i])
				}
			}
			if err := a.MarkStepBoundary(); !errors.Is(err, zarena.ErrCaptureUnsafe) {
				return 0, fmt.Errorf("a floor over the zone while a graph exists: %v", err)
			}
			fmt.Printf("captured at step %d, %d kernels, at the eager steps' addresses; a floor "+
				"over the plan's zone is refused while the graph exists\n", step, len(r.graph))
			if err := a.GraphReplay(g); err != nil { // the first launch: the captured step
				return 0, err
			}
			r.launch()
			continue
		}
		if eager, err = graphStep(a, r, in, w, acc, 0); err != nil {
			return 0, err
		}
	}
	if useGraph {
		s, err := a.Stats()
		if err != nil {
			return 0, err
		}
		info, err := a.GraphInfo()
		if err != nil {
			return 0, err
		}
		if g == 0 || info.Replays != uint64(replays) || info.FailedCaptures != 1 || s.PlanMisses == 0 {
			return 0, fmt.Errorf("graph %d, %d replays (the arena counted %d), %d failed captures",
				g, replays, info.Replays, info.FailedCaptures)
		}
		if s.PlanSteps < uint64(replays) {
			return 0, fmt.Errorf("%d replays, %d planned steps", replays, s.PlanSteps)
		}
		fmt.Printf("%d steps replayed (GraphInfo.Replays=%d), each a planned step, nothing "+
			"allocated\n", replays, info.Replays)
		if err := a.GraphRelease(g); err != nil {
			return 0, err
		}
	}
	var sum float64
	for _, v := range as {
		sum += float64(v)
	}
	return sum, nil
}

func graphs() error {
	fmt.Println("== 8. a graph-stable step: captured once, replayed in the plan's memory")
	const steps = 40
	want, err := graphRun(steps, false)
	if err != nil {
		return err
	}
	got, err := graphRun(steps, true)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("the replayed steps computed %v, the eager steps %v", got, want)
	}
	fmt.Printf("%d steps eager and %d steps mostly replayed compute the same: %v\n", steps, steps, got)
	return nil
}
