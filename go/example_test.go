package zarena_test

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"

	zarena "github.com/zarena/zarena/go"
)

// A training loop: the weights below the step boundary, a Step per batch (the arena is
// reset after each), the counters at the end.
func Example() {
	a, err := zarena.New(zarena.Config{Backend: zarena.BackendHost, CapacityBytes: 64 << 20})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()
	if _, err := a.Alloc(16 << 20); err != nil { // the weights
		fmt.Println(err)
		return
	}
	if err := a.MarkStepBoundary(); err != nil { // they survive every reset
		fmt.Println(err)
		return
	}
	for step := 0; step < 10; step++ {
		err := a.Step(func() error {
			act, err := a.Alloc(4 << 20)
			if err != nil {
				return err
			}
			grad, err := a.Alloc(4 << 20)
			if err != nil {
				return err
			}
			_ = a.Free(act) // queued: applied by the next allocation
			_ = grad        // reclaimed by the reset that ends the step
			return nil
		})
		if err != nil {
			fmt.Println(err)
			return
		}
	}
	s, err := a.Stats()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("epoch %d, resets %d, live blocks %d, high water %d MiB\n", a.Epoch(), s.Resets,
		s.LiveAllocs, s.HighWaterBytes>>20)
	// Output: epoch 10, resets 10, live blocks 1, high water 24 MiB
}

// A tensor freed by its finalizer carries the epoch it was allocated in: a finalizer that
// runs after a reset, when the address belongs to a newer tensor, leaves that one alone.
func ExampleArena_FreeBlock() {
	a, err := zarena.New(zarena.Config{Backend: zarena.BackendHost, CapacityBytes: 1 << 20})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()
	old, _ := a.AllocBlock(4096)
	_ = a.Reset()
	cur, _ := a.AllocBlock(4096) // the same address, a new epoch
	fmt.Println("same address:", cur.Ptr == old.Ptr, "epochs:", old.Epoch, cur.Epoch)

	_ = a.FreeBlock(old) // the late finalizer: queued, checked when applied
	for _, err := range a.FreeErrors() {
		fmt.Println("dropped:", errors.Is(err, zarena.ErrStale))
	}
	fmt.Println("the live block still frees:", a.FreeNow(cur.Ptr, cur.Epoch) == nil)
	// Output:
	// same address: true epochs: 0 1
	// dropped: true
	// the live block still frees: true
}

// FreeNow returns the outcome of the free at once; a wrong free changes nothing.
func ExampleArena_FreeNow() {
	a, err := zarena.New(zarena.Config{Backend: zarena.BackendHost, CapacityBytes: 1 << 20})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()
	p, _ := a.Alloc(1000)
	fmt.Println(a.FreeNow(p+256, zarena.AnyEpoch) != nil) // not a block start: ErrNotOwned
	fmt.Println(a.FreeNow(p, zarena.AnyEpoch))
	err = a.FreeNow(p, zarena.AnyEpoch)
	fmt.Println(errors.Is(err, zarena.ErrDoubleFree), zarena.StatusOf(err))
	// Output:
	// true
	// <nil>
	// true double free
}

// A layer's outputs in one cgo call.
func ExampleArena_AllocBatch() {
	a, err := zarena.New(zarena.Config{Backend: zarena.BackendHost, CapacityBytes: 1 << 20})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()
	sizes := []uint64{1000, 4096, 0, 300}
	blocks := make([]zarena.Block, len(sizes))
	if err := a.AllocBatch(sizes, 0, blocks); err != nil {
		fmt.Println(err)
		return
	}
	for _, b := range blocks {
		fmt.Println(b.Size, b.Ptr != 0)
	}
	// Output:
	// 1024 true
	// 4096 true
	// 0 false
	// 512 true
}

// An activation saved for the backward pass survives the reset between the passes.
func ExampleArena_Pin() {
	a, err := zarena.New(zarena.Config{Backend: zarena.BackendHost, CapacityBytes: 1 << 20})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()
	act, _ := a.AllocBlock(64 << 10)
	_ = a.Pin(act.Ptr)
	_ = a.Reset() // the forward pass's scratch goes, the pinned activation stays
	s, _ := a.Stats()
	fmt.Println("pinned bytes after the reset:", s.PinnedBytes)
	_ = a.Free(act.Ptr) // freed while pinned: it goes at the last Unpin
	_ = a.Unpin(act.Ptr)
	s, _ = a.Stats()
	fmt.Println("live blocks after the unpin:", s.LiveAllocs)
	// Output:
	// pinned bytes after the reset: 65536
	// live blocks after the unpin: 0
}

// A program that wires no logger still sees the diagnosis on stderr; one that does gets
// typed records, before the failing call returns.
func ExampleSetLogger() {
	var mu sync.Mutex // the logger runs on a goroutine of the package
	var events []string
	_ = zarena.SetLogger(func(r zarena.Record) {
		if r.Arena == "example" {
			v, _ := r.Field("verdict")
			mu.Lock()
			events = append(events, fmt.Sprint(r.Event, " ", v))
			mu.Unlock()
		}
	}, zarena.LevelWarn)
	defer zarena.SetLogger(nil, zarena.LevelFromEnv())

	a, err := zarena.New(zarena.Config{Backend: zarena.BackendHost, CapacityBytes: 1 << 20,
		OverflowPolicy: zarena.OverflowRefuse, Name: "example"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()
	_, err = a.Alloc(2 << 20) // larger than the arena
	verdict, _ := zarena.DiagnosisOf(err)
	fmt.Println(errors.Is(err, zarena.ErrOutOfMemory), verdict)
	mu.Lock()
	fmt.Println(events) // already delivered: the failed call waited for them
	mu.Unlock()
	// Output:
	// true runaway_buffer
	// [arena.first_overflow runaway_buffer]
}

// The records as slog records, through any slog.Handler.
func ExampleSlogLogger() {
	h := slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		Level: slog.LevelWarn,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == slog.MessageKey ||
				(a.Key != "event" && a.Key != "verdict" && a.Key != slog.LevelKey) {
				return slog.Attr{}
			}
			return a
		},
	})
	_ = zarena.SetLogger(zarena.SlogLogger(h))
	defer zarena.SetLogger(nil, zarena.LevelFromEnv())

	a, err := zarena.New(zarena.Config{Backend: zarena.BackendHost, CapacityBytes: 1 << 20,
		OverflowPolicy: zarena.OverflowRefuse, Name: "slog-example"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()
	_, _ = a.Alloc(2 << 20)
	// Output:
	// level=WARN event=arena.first_overflow verdict=runaway_buffer
}

// Close is safe while other goroutines still call: their later calls say ErrClosed.
func ExampleErrClosed() {
	a, err := zarena.New(zarena.Config{Backend: zarena.BackendHost, CapacityBytes: 1 << 20})
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = a.Close()
	_, err = a.Alloc(1)
	fmt.Println(errors.Is(err, zarena.ErrClosed), errors.Is(err, zarena.ErrInvalidArgument))
	// Output: true false
}
