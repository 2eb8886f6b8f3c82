package main

import (
	"errors"
	"fmt"
	"sync"

	zarena "github.com/zarena/zarena/go"
)

// pool is an engine's memory pool on one arena (one per device, say): it wants the
// arena's log records, and only its own.
type pool struct {
	name      string
	a         *zarena.Arena
	mu        sync.Mutex
	overflows int // arena.first_overflow / arena.overflow_summary records routed here
}

// pools shows the pieces of issue 24 a ztensor-style pool builds on: log records routed
// to their pool by the arena they name (Record.Handle), a capture declared once for every
// arena (CaptureBegin), pins of views (interior pointers), Base and CapacityBytes for
// offsets, the pinned peak, and the errors that say which misuse it was.
func pools() error {
	fmt.Println("== 6. pools: records routed by arena, one capture for all, pins of views")
	byArena := map[*zarena.Arena]*pool{}
	var mapMu sync.Mutex
	// Both arenas carry the same name: the name cannot route, the identity does.
	route := func(r zarena.Record) {
		mapMu.Lock()
		p := byArena[r.Handle()] // nil Handle: process-wide, or after Close
		mapMu.Unlock()
		if p == nil || (r.Event != "arena.first_overflow" && r.Event != "arena.overflow_summary") {
			return
		}
		p.mu.Lock()
		p.overflows++
		p.mu.Unlock()
	}
	if err := zarena.SetLogger(route, zarena.LevelInfo); err != nil {
		return err
	}
	defer zarena.SetLogger(nil, zarena.LevelFromEnv())
	var ps []*pool
	for _, name := range []string{"device0", "device1"} {
		a, err := zarena.New(zarena.Config{
			Backend: zarena.BackendHost, CapacityBytes: 1 << 20, Name: "pool",
			OverflowPolicy: zarena.OverflowSync, OverflowLimitBytes: 8 << 20,
			ClearFlags: zarena.FlagPoison,
		})
		if err != nil {
			return err
		}
		defer a.Close()
		p := &pool{name: name, a: a}
		mapMu.Lock()
		byArena[a] = p
		mapMu.Unlock()
		ps = append(ps, p)
	}

	// Only device1 overflows: only device1's pool hears of it.
	big, err := ps[1].a.Alloc(2 << 20)
	if err != nil {
		return err
	}
	if err := ps[1].a.Free(big); err != nil {
		return err
	}
	zarena.FlushLogs()
	for i, want := range []int{0, 1} {
		ps[i].mu.Lock()
		got := ps[i].overflows
		ps[i].mu.Unlock()
		if got != want {
			return fmt.Errorf("pool %s got %d overflow records, want %d", ps[i].name, got, want)
		}
	}
	fmt.Printf("two arenas named %q: the overflow record reached %s's pool alone (arena id %d)\n",
		"pool", ps[1].name, ps[1].a.ID())

	// One capture for the process: every arena refuses a synchronous overflow (which would
	// break the capture) before any CUDA call, those created during it too.
	if err := zarena.CaptureBegin(zarena.CaptureProcess, 0); err != nil {
		return err
	}
	for _, p := range ps {
		if _, err := p.a.Alloc(2 << 20); !errors.Is(err, zarena.ErrCaptureUnsafe) {
			zarena.CaptureEnd(zarena.CaptureProcess, 0)
			return fmt.Errorf("%s: SYNC overflow during the capture: %v", p.name, err)
		}
	}
	if err := zarena.CaptureEnd(zarena.CaptureProcess, 0); err != nil {
		return err
	}
	fmt.Println("CaptureBegin(CaptureProcess): both pools refused a SYNC overflow; CaptureEnd lifted it")

	// A view into a block (an interior pointer) pins the whole block; the pin survives a
	// reset; any address inside the block unpins it.
	a := ps[0].a
	blk, err := a.AllocBlock(64 << 10)
	if err != nil {
		return err
	}
	view := blk.Ptr + 4096 // the second half of a split tensor, say
	if err := a.Pin(view); err != nil {
		return err
	}
	if err := a.Reset(); err != nil {
		return err
	}
	s, err := a.Stats()
	if err != nil {
		return err
	}
	if s.PinnedBytes != blk.Size || s.PinnedPeakBytes < blk.Size {
		return fmt.Errorf("pinned %d, peak %d, want %d", s.PinnedBytes, s.PinnedPeakBytes, blk.Size)
	}
	off := uint64(uintptr(view) - uintptr(a.Base()))
	if off >= a.CapacityBytes() {
		return fmt.Errorf("view offset %d outside the region of %d bytes", off, a.CapacityBytes())
	}
	if err := a.Unpin(blk.Ptr + 100); err != nil {
		return err
	}
	if err := a.Unpin(view); !errors.Is(err, zarena.ErrNotPinned) {
		return fmt.Errorf("unpinning twice: %v, want ErrNotPinned", err)
	}
	if err := a.ResetPeakStats(); err != nil {
		return err
	}
	if s, err = a.Stats(); err != nil || s.PinnedPeakBytes != 0 {
		return fmt.Errorf("pinned peak after ResetPeakStats: %d (%v)", s.PinnedPeakBytes, err)
	}
	fmt.Printf("a view at Base+%d (of %d bytes) pinned its %d-byte block across a reset; "+
		"pinned peak %d; the second unpin is ErrNotPinned\n",
		off, a.CapacityBytes(), blk.Size, blk.Size)
	if err := a.Free(blk.Ptr); err != nil {
		return err
	}
	if err := ps[1].a.Close(); err != nil {
		return err
	}
	if _, err := ps[1].a.Alloc(1); !errors.Is(err, zarena.ErrClosed) {
		return fmt.Errorf("Alloc after Close: %v, want ErrClosed", err)
	}
	fmt.Println("after Close: ErrClosed, not ErrInvalidArgument")
	return nil
}
