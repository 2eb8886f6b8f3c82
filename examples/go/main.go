// Command gradaccum replays, in Go, the failure zarena was built after: a training
// loop doing per-sample gradient accumulation on an arena that it never resets. The
// arena warns that the same step keeps starting without a reset, then overflows with
// the verdict never_reset; both arrive through log/slog. The fixed loop marks the step
// boundary after the weights and resets after every sample, and never grows.
//
// Both loops keep the weights and the gradient accumulator in the arena: the broken one
// uploads them and starts sampling (no step boundary, no reset), the fixed one marks the
// step boundary after them, so they survive every reset.
//
// It uses the host backend, so it runs on any machine:
//
//	scripts/go-test.sh build     # from the repository root: tests, then this example
//	cd examples/go && PKG_CONFIG_PATH=../../build/go-pkgconfig go run .
package main

import (
	"fmt"
	"log/slog"
	"os"

	zarena "github.com/zarena/zarena/go"
)

const (
	mib      = 1 << 20
	capacity = 256 * mib
	samples  = 40
)

// A per-sample pass: forward activations, then backward buffers, in the same order
// every sample (the engine's op sequence).
var forward = []uint64{3 * mib / 2, 768 << 10, 2 * mib, 512 << 10}
var backward = []uint64{2 * mib, 1 * mib, 256 << 10, 384 << 10}

// sample runs one per-sample pass. Like the engine, it frees what it knows is dead
// (the backward scratch) and leaves the activations to the arena's reset.
func sample(a *zarena.Arena) error {
	for _, n := range forward {
		if _, err := a.Alloc(n); err != nil {
			return err
		}
	}
	var scratch []zarena.DevicePtr
	for _, n := range backward {
		p, err := a.Alloc(n)
		if err != nil {
			return err
		}
		scratch = append(scratch, p)
	}
	for i := len(scratch) - 1; i >= 1; i-- { // the first backward buffer feeds the next op
		if err := a.Free(scratch[i]); err != nil {
			return err
		}
	}
	return nil
}

// loadWeights uploads the parameters and the gradient accumulator.
func loadWeights(a *zarena.Arena) error {
	for _, n := range []uint64{4 * mib, 4 * mib, 2 * mib, 10 * mib} {
		if _, err := a.Alloc(n); err != nil {
			return err
		}
	}
	return nil
}

func run(name string, fixed bool) error {
	a, err := zarena.New(zarena.Config{
		Backend:       zarena.BackendHost,
		CapacityBytes: capacity,
		Name:          name,
	})
	if err != nil {
		return err
	}
	defer a.Close()
	if err := loadWeights(a); err != nil {
		return err
	}
	if fixed {
		if err := a.MarkStepBoundary(); err != nil { // the weights survive every reset
			return err
		}
	}
	for i := 0; i < samples; i++ {
		if fixed {
			err = a.Step(func() error { return sample(a) })
		} else {
			err = sample(a) // accumulate gradients over samples, never reset
		}
		if err != nil {
			return fmt.Errorf("sample %d: %w", i, err)
		}
	}
	// Records reach the logger asynchronously; let this run's warnings print first.
	zarena.FlushLogs()
	s, err := a.Stats()
	if err != nil {
		return err
	}
	fmt.Printf("%s: %d samples, resets=%d, allocs this epoch=%d, high water %.1f of %d MiB, "+
		"overflow allocations=%d (peak %.1f MiB), live blocks=%d\n\n",
		name, samples, s.Resets, s.EpochAllocs, float64(s.HighWaterBytes)/mib, capacity/mib,
		s.OverflowAllocs, float64(s.OverflowPeakBytes)/mib, s.LiveAllocs)
	return nil
}

func main() {
	// Warnings only: the arena.config and arena.destroy records (info) are long.
	h := slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelWarn})
	// zarena.SetLogger(zarena.SlogLogger(h)) is all a program needs; the example also
	// remembers the verdicts it saw, to fail loudly if the diagnosis went missing.
	toSlog, _ := zarena.SlogLogger(h)
	verdicts := make(chan string, 16)
	err := zarena.SetLogger(func(r zarena.Record) {
		if v, ok := r.Field("verdict"); ok {
			select {
			case verdicts <- fmt.Sprintf("%s %s %v", r.Arena, r.Event, v):
			default:
			}
		}
		toSlog(r)
	}, zarena.LevelWarn)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("== 1. per-sample gradient accumulation, the arena is never reset")
	if err := run("never-reset", false); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("== 2. mark the step boundary after the weights, reset after every sample")
	if err := run("reset-per-sample", true); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	close(verdicts)
	seen := map[string]bool{}
	for v := range verdicts {
		seen[v] = true
	}
	want := []string{"never-reset arena.reset_cadence never_reset",
		"never-reset arena.first_overflow never_reset"}
	for _, w := range want {
		if !seen[w] {
			fmt.Fprintf(os.Stderr, "expected the diagnosis %q; saw %v\n", w, seen)
			os.Exit(1)
		}
	}
	if len(seen) != len(want) {
		fmt.Fprintf(os.Stderr, "the fixed loop should log no verdict; saw %v\n", seen)
		os.Exit(1)
	}
	fmt.Println("diagnosed: reset_cadence warning and first_overflow verdict never_reset for the " +
		"loop without resets; nothing for the loop with them")
}
