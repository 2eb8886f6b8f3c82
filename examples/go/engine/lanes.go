package main

import (
	"fmt"
	"unsafe"

	zarena "github.com/zarena/zarena/go"
)

// lanes is part 9: one stream = one Lane = one slot = one plan. Each worker goroutine of
// the engine (a stream's dispatcher, say) gets a Lane of its own (NewLane): a region slot
// of its own and a step plan of its own, so every worker's step is learned and then served
// by the binding without a crossing, while the workers share one arena. A worker without a
// Lane would share the arena's one plan with every other, and their requests, interleaved,
// would not repeat.
func lanes() error {
	fmt.Println("== 9. a Lane per worker: each worker's step planned on its own")
	a, err := zarena.New(zarena.Config{Backend: zarena.BackendHost, CapacityBytes: 64 << 20,
		Name: "lanes", ClearFlags: zarena.FlagPoison})
	if err != nil {
		return err
	}
	defer a.Close()
	const workers, steps, perStep = 4, 40, 24
	errs := make(chan error, workers)
	lanes := make([]zarena.Lane, workers)
	for w := range lanes {
		if lanes[w], err = a.NewLane(); err != nil {
			return err
		}
	}
	for w := 0; w < workers; w++ {
		go func(l zarena.Lane, tag byte) {
			errs <- worker(l, tag, steps, perStep)
		}(lanes[w], byte(w+1))
	}
	for w := 0; w < workers; w++ {
		if err := <-errs; err != nil {
			return err
		}
	}
	for w, l := range lanes {
		s, err := l.Stats()
		if err != nil {
			return err
		}
		// The first steps are learned (the library serves them); the rest are planned.
		if s.PlanHits < uint64((steps-4)*perStep) {
			return fmt.Errorf("worker %d: %d of %d allocations planned", w, s.PlanHits, steps*perStep)
		}
		fmt.Printf("worker %d: slot %d, %d of %d allocations served by its own plan (zone %d KiB)\n",
			w, s.Slot, s.PlanHits, steps*perStep, s.PlanZoneBytes>>10)
		if err := l.Close(); err != nil {
			return err
		}
	}
	return nil
}

// worker runs one worker's steps on its Lane: each step a chain of tensors of the
// worker's own sizes, each freed once the next one is made; it checks that no other
// worker wrote into its blocks.
func worker(l zarena.Lane, tag byte, steps, perStep int) error {
	for step := 0; step < steps; step++ {
		if err := l.StepBegin(); err != nil {
			return err
		}
		var prev zarena.Block
		for i := 0; i < perStep; i++ {
			b, err := l.AllocBlock(uint64(kib * (1 + (i+int(tag))%5)))
			if err != nil {
				return err
			}
			mem := unsafe.Slice((*byte)(b.Ptr.Pointer()), b.Size)
			for k := range mem {
				mem[k] = tag
			}
			if prev.Ptr != 0 {
				old := unsafe.Slice((*byte)(prev.Ptr.Pointer()), prev.Size)
				for k := range old {
					if old[k] != tag {
						return fmt.Errorf("worker %d: its block was written by worker %d", tag, old[k])
					}
				}
				if err := l.FreeBlock(prev); err != nil {
					return err
				}
			}
			prev = b
		}
		if err := l.FreeBlock(prev); err != nil {
			return err
		}
	}
	return nil
}
