// Command engine is a tiny tensor engine on a zarena arena, built the way a Go engine
// such as ztensor uses its arena, on the host backend so it runs anywhere:
//
//  1. Tensors are freed by finalizers with epoch-checked frees (Arena.FreeBlock): a
//     finalizer that runs after a reset, when the address belongs to a new tensor, is
//     dropped as stale instead of freeing the live tensor.
//  2. The forward pass saves an activation for backward with a pin: a reset between the
//     passes reclaims the forward scratch but leaves the pinned activation, bytes intact.
//  3. Graph capture is marked (SetCaptureActive): an allocation that would need a
//     synchronous overflow is refused during the capture, before any CUDA call, and the
//     engine falls back to running uncaptured.
//  4. Poison (SetPoison) catches a use-after-reset, and a use-after-free as soon as Free
//     returns: a kernel that reads a stale tensor gets NaN instead of yesterday's numbers.
//  5. Layers run on many goroutines at once, each allocating a layer's outputs in one
//     crossing (AllocBatch) and freeing them without one: the arena's free queue is
//     sharded, so the goroutines do not wait for each other, and a whole-arena call
//     (Stats, Reset) still sees every free made before it.
//  6. Pools (pools.go): log records reach the pool of the arena they name (Record.Handle,
//     even for two arenas of one name); one CaptureBegin(CaptureProcess) covers every
//     arena; a pin through a view (an interior pointer) holds the whole block; Base and
//     CapacityBytes give offsets without a crossing; the pinned peak; ErrNotPinned and
//     ErrClosed say which misuse it was.
//  7. The engine's own pool takes zarena's overflow (SetOverflowAllocator), the diagnosis
//     is in the logger when Alloc returns (FlagDiagnoseSync), and the overflow policy
//     changes at run time while a block lives (overflow.go).
//  8. A graph-stable step (graphs.go): under a step plan, the step is captured once
//     (GraphCaptureBegin/End) and replayed (GraphReplay) in the plan's own memory; a
//     captured step that differs from the plan is refused; the replayed steps compute
//     what eager steps compute.
//  9. A Lane per worker (lanes.go): one stream = one Lane = one slot = one plan; each
//     worker goroutine's step is learned and served by its own plan, without crossings,
//     on one shared arena.
//
// It exits non-zero when one of these does not hold (scripts/go-test.sh runs it):
//
//	cd examples/go && PKG_CONFIG_PATH=../../build/go-pkgconfig go run ./engine
package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	zarena "github.com/zarena/zarena/go"
)

// Engine owns the arena; tensors are its blocks.
type Engine struct {
	a         *zarena.Arena
	finalized atomic.Int64
}

// Tensor is a float32 vector in the arena. The engine frees it when the garbage
// collector finds it unreachable, as ztensor does, with the epoch it was allocated in.
type Tensor struct {
	e   *Engine
	blk zarena.Block
	n   int
}

func (e *Engine) tensor(n int) (*Tensor, error) {
	blk, err := e.a.AllocBlock(uint64(4 * n))
	if err != nil {
		return nil, err
	}
	t := &Tensor{e: e, blk: blk, n: n}
	runtime.SetFinalizer(t, func(t *Tensor) {
		_ = t.e.a.FreeBlock(t.blk) // queued; a block of an earlier epoch is left alone
		t.e.finalized.Add(1)
	})
	return t, nil
}

// data is the tensor's memory (host backend: Go may read it; on CUDA it would be the
// kernel argument t.blk.Ptr.Pointer()).
func (t *Tensor) data() []float32 { return unsafe.Slice((*float32)(t.blk.Ptr.Pointer()), t.n) }

func (e *Engine) fill(n int, v float32) (*Tensor, error) {
	t, err := e.tensor(n)
	if err != nil {
		return nil, err
	}
	d := t.data()
	for i := range d {
		d[i] = v
	}
	return t, nil
}

// mulRelu is the forward op: relu(x * w), elementwise.
func (e *Engine) mulRelu(x, w *Tensor) (*Tensor, error) {
	y, err := e.tensor(x.n)
	if err != nil {
		return nil, err
	}
	xd, wd, yd := x.data(), w.data(), y.data()
	for i := range yd {
		yd[i] = float32(math.Max(0, float64(xd[i]*wd[i])))
	}
	return y, nil
}

// waitFinalizers collects garbage until n more finalizers ran.
func (e *Engine) waitFinalizers(before, n int64) error {
	deadline := time.Now().Add(10 * time.Second)
	for e.finalized.Load() < before+n {
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d finalizers ran", e.finalized.Load()-before, n)
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	return nil
}

const (
	n   = 4096 // elements per tensor (16 KiB)
	kib = 1 << 10
)

func run() error {
	// One OS thread, as a CUDA engine's dispatch goroutine usually is: zarena lays blocks
	// out per thread, so the demonstration's addresses repeat exactly.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	a, err := zarena.New(zarena.Config{
		Backend: zarena.BackendHost, CapacityBytes: 8 << 20, Name: "engine",
		OverflowPolicy: zarena.OverflowSync,
		ClearFlags:     zarena.FlagPoison, // the engine decides (part 4), not ZARENA_POISON
	})
	if err != nil {
		return err
	}
	defer a.Close()
	e := &Engine{a: a}
	w, err := e.fill(n, 0.5) // weights: below the floor, they survive every reset
	if err != nil {
		return err
	}
	if err := a.MarkStepBoundary(); err != nil {
		return err
	}

	fmt.Println("== 1. finalizers free tensors with epoch-checked frees")
	old, err := e.fill(n, 1)
	if err != nil {
		return err
	}
	if err := a.Reset(); err != nil { // end of step; `old` is still referenced (a leak)
		return err
	}
	cur, err := e.fill(n, 2) // the next step's tensor takes the same address
	if err != nil {
		return err
	}
	if cur.blk.Ptr != old.blk.Ptr {
		return fmt.Errorf("the new tensor did not reuse the address (%#x vs %#x)", cur.blk.Ptr, old.blk.Ptr)
	}
	before := e.finalized.Load()
	old = nil // the finalizer runs now, one epoch late
	if err := e.waitFinalizers(before, 1); err != nil {
		return err
	}
	s, err := a.Stats() // applies the queued free
	if err != nil {
		return err
	}
	if s.StaleFrees != 1 || cur.data()[0] != 2 {
		return fmt.Errorf("the late finalizer freed the live tensor: stale frees %d", s.StaleFrees)
	}
	// The live tensor still belongs to the arena: a checked free of it succeeds.
	if err := a.FreeNow(cur.blk.Ptr, cur.blk.Epoch); err != nil {
		return fmt.Errorf("the live tensor was freed behind its back: %w", err)
	}
	runtime.SetFinalizer(cur, nil)
	fmt.Printf("tensor %#x of epoch %d finalized in epoch %d: dropped as stale (stale_frees=%d); "+
		"the live tensor at the same address was untouched\n", uintptr(cur.blk.Ptr), cur.blk.Epoch-1,
		cur.blk.Epoch, s.StaleFrees)
	// Ordinary garbage: steps whose temporaries only finalizers free, in batches that
	// ride on the next allocations.
	before = e.finalized.Load()
	for step := 0; step < 3; step++ {
		x, err := e.fill(n, float32(step))
		if err != nil {
			return err
		}
		for k := 0; k < 4; k++ {
			if x, err = e.mulRelu(x, w); err != nil {
				return err
			}
		}
		runtime.KeepAlive(x)
	}
	if err := e.waitFinalizers(before, 15); err != nil {
		return err
	}
	if s, err = a.Stats(); err != nil || s.LiveAllocs != 1 || s.StaleFrees != 1 || s.InvalidFrees != 0 {
		return fmt.Errorf("after the finalizers: %d live (want the weights alone), %d stale, %d invalid",
			s.LiveAllocs, s.StaleFrees, s.InvalidFrees)
	}
	fmt.Println("3 steps of garbage: 15 temporaries freed by their finalizers, only the weights live")
	if err := a.Reset(); err != nil {
		return err
	}

	fmt.Println("== 2. save for backward: a pinned activation survives the reset")
	x, err := e.fill(n, 3)
	if err != nil {
		return err
	}
	h, err := e.mulRelu(x, w) // the activation backward needs: 1.5 everywhere
	if err != nil {
		return err
	}
	if err := a.Pin(h.blk.Ptr); err != nil {
		return err
	}
	for k := 0; k < 8; k++ { // forward scratch
		if _, err := e.fill(n, 9); err != nil {
			return err
		}
	}
	if err := a.Reset(); err != nil { // reclaims the forward scratch, keeps h
		return err
	}
	for k := 0; k < 16; k++ { // backward allocations: never inside h
		g, err := e.fill(n, -1)
		if err != nil {
			return err
		}
		if g.blk.Ptr < h.blk.Ptr+zarena.DevicePtr(h.blk.Size) && h.blk.Ptr < g.blk.Ptr+zarena.DevicePtr(g.blk.Size) {
			return fmt.Errorf("backward tensor %#x overlaps the pinned activation %#x", g.blk.Ptr, h.blk.Ptr)
		}
	}
	for i, v := range h.data() {
		if v != 1.5 {
			return fmt.Errorf("the pinned activation changed across the reset: h[%d] = %v", i, v)
		}
	}
	ps, err := a.Stats()
	if err != nil {
		return err
	}
	fmt.Printf("activation %#x pinned across a reset: intact (pinned_bytes=%d, pin_retained_bytes=%d)\n",
		uintptr(h.blk.Ptr), ps.PinnedBytes, ps.PinRetainedBytes)
	if err := a.Unpin(h.blk.Ptr); err != nil {
		return err
	}
	if err := a.Reset(); err != nil {
		return err
	}

	fmt.Println("== 3. capture: a synchronous overflow is refused while the engine captures")
	r, err := a.RegionInfo()
	if err != nil {
		return err
	}
	if _, err := a.AllocBlock(r.CapacityBytes - r.TopBytes); err != nil { // fill the region
		return err
	}
	if err := a.SetCaptureActive(true); err != nil {
		return err
	}
	_, err = e.tensor(n) // needs overflow, SYNC: unsafe inside a capture
	if !errors.Is(err, zarena.ErrCaptureUnsafe) {
		return fmt.Errorf("allocation during capture: %v, want ErrCaptureUnsafe", err)
	}
	fmt.Printf("during capture: %v\n", zarena.StatusOf(err))
	if err := a.SetCaptureActive(false); err != nil { // the engine falls back: no capture
		return err
	}
	if _, err := e.tensor(n); err != nil {
		return fmt.Errorf("after the capture: %w", err)
	}
	fmt.Println("after the capture: the same allocation overflows normally")
	if err := a.Reset(); err != nil {
		return err
	}

	fmt.Println("== 4. poison catches a use-after-reset")
	read := func() (float32, error) {
		t, err := e.fill(n, 7)
		if err != nil {
			return 0, err
		}
		stale := t.data() // the bug: a kernel keeps the tensor past the step
		if err := a.Reset(); err != nil {
			return 0, err
		}
		return stale[0], nil
	}
	v, err := read()
	if err != nil {
		return err
	}
	fmt.Printf("poison off: the stale tensor reads %v (yesterday's value, silently wrong)\n", v)
	if err := a.SetPoison(true, 0); err != nil {
		return err
	}
	if v, err = read(); err != nil {
		return err
	}
	if !math.IsNaN(float64(v)) || math.Float32bits(v) != zarena.DefaultPoisonWord {
		return fmt.Errorf("poison on: the stale tensor reads %v, want NaN", v)
	}
	fmt.Printf("poison on: the stale tensor reads %v: the bug shows\n", v)
	// A use after free: the block is filled before Free returns, not at the next call.
	t, err := e.fill(n, 5)
	if err != nil {
		return err
	}
	runtime.SetFinalizer(t, nil)
	if err := a.Free(t.blk.Ptr); err != nil {
		return err
	}
	if v := t.data()[0]; !math.IsNaN(float64(v)) {
		return fmt.Errorf("poison on: a tensor read right after Free reads %v, want NaN", v)
	}
	if s, err = a.Stats(); err != nil {
		return err
	}
	fmt.Printf("poison on: a tensor read right after Free reads NaN (poison_fills=%d)\n",
		s.PoisonFills)
	if err := a.SetPoison(false, 0); err != nil {
		return err
	}
	if err := a.Reset(); err != nil {
		return err
	}
	return layers(a)
}

// layers runs a layer's worth of work on each of several goroutines at once: each
// allocates its outputs in one crossing, checks no other goroutine's block overlaps its
// own, and frees them (queued on its shard); Stats, a whole-arena call, sees every free.
func layers(a *zarena.Arena) error {
	fmt.Println("== 5. layers on 8 goroutines: batched allocations, frees that do not wait")
	const workers, rounds, outputs = 8, 200, 16
	sizes := make([]uint64, outputs)
	for i := range sizes {
		sizes[i] = uint64(4 * kib * (1 + i%4))
	}
	errs := make(chan error, workers)
	for g := 0; g < workers; g++ {
		go func(tag byte) {
			blocks := make([]zarena.Block, outputs)
			for r := 0; r < rounds; r++ {
				if err := a.AllocBatch(sizes, 0, blocks); err != nil {
					errs <- err
					return
				}
				for _, b := range blocks {
					mem := unsafe.Slice((*byte)(b.Ptr.Pointer()), b.Size)
					for i := range mem {
						mem[i] = tag
					}
				}
				for _, b := range blocks {
					mem := unsafe.Slice((*byte)(b.Ptr.Pointer()), b.Size)
					for i := range mem {
						if mem[i] != tag {
							errs <- fmt.Errorf("block %#x of goroutine %d was written by goroutine %d",
								b.Ptr, tag, mem[i])
							return
						}
					}
					if err := a.FreeBlock(b); err != nil {
						errs <- err
						return
					}
				}
			}
			errs <- nil
		}(byte(g + 1))
	}
	for g := 0; g < workers; g++ {
		if err := <-errs; err != nil {
			return err
		}
	}
	s, err := a.Stats()
	if err != nil {
		return err
	}
	if s.LiveAllocs != 1 || s.InvalidFrees != 0 || s.StaleFrees != 1 {
		return fmt.Errorf("after the layers: %d live (want the weights alone), %d invalid, %d stale",
			s.LiveAllocs, s.InvalidFrees, s.StaleFrees)
	}
	fmt.Printf("%d goroutines x %d rounds x %d outputs: no block shared, every free applied "+
		"before Stats (live: the weights alone)\n", workers, rounds, outputs)
	return nil
}

func main() {
	err := run()
	if err == nil {
		err = pools()
	}
	if err == nil {
		err = overflowRoute()
	}
	if err == nil {
		err = graphs()
	}
	if err == nil {
		err = lanes()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "engine:", err)
		os.Exit(1)
	}
}
