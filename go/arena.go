package zarena

/*
#include "shim.h"

static inline int32_t shim_backend(uintptr_t a) { return zarena_backend((const zarena*)a); }
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// DevicePtr is an address handed out by an Arena: device memory for the CUDA backend,
// host memory for the host backend. It is not Go memory and the Go garbage collector
// does not track it.
type DevicePtr uintptr

// Pointer returns p as an unsafe.Pointer, for APIs that take one (a CUDA binding's
// kernel arguments; host-backend memory read from Go). It is the same address: device
// memory must not be dereferenced from Go. Converting here, through p's own memory,
// keeps go vet's unsafeptr check quiet, which a plain unsafe.Pointer(uintptr(p)) at
// the caller would not; the address is never Go memory, so the garbage collector
// ignores it.
func (p DevicePtr) Pointer() unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

// AnyEpoch as an epoch checks nothing: FreeNow(p, AnyEpoch) frees whatever block starts
// at p (ZARENA_ANY_EPOCH).
const AnyEpoch = ^uint64(0)

// BlockFlags describe an allocation (ZARENA_BLOCK_*; the bits: block_flags_gen.go).
type BlockFlags uint32

// Block is what AllocBlock hands out: the pointer, the epoch it belongs to (FreeBlock
// checks it), its size (the request rounded up to the alignment), flags and tag, all from
// the one crossing that allocated it. Its layout is zarena_block's (AllocBatch fills
// Blocks in place).
type Block struct {
	Ptr   DevicePtr
	Epoch uint64
	Size  uint64
	Flags BlockFlags
	Tag   Tag
}

var (
	_ [unsafe.Sizeof(Block{}) - C.sizeof_zarena_block]struct{}
	_ [C.sizeof_zarena_block - unsafe.Sizeof(Block{})]struct{}
	_ [unsafe.Offsetof(Block{}.Tag) - unsafe.Offsetof(C.zarena_block{}.tag)]struct{}
	_ [unsafe.Offsetof(C.zarena_block{}.tag) - unsafe.Offsetof(Block{}.Tag)]struct{}
)

// Arena is one zarena arena. Every method may be called from many goroutines at once,
// Close included: calls that began before Close complete first, later ones return
// ErrClosed. Reset may run concurrently with the others, but no goroutine may still use
// a block that the reset reclaims, nor any block after Close.
type Arena struct {
	// h and poison change only while every shard lock is held, so one shard lock is
	// enough to read them.
	h      C.uintptr_t // the library's arena; 0 once closed
	poison bool        // poison is on: frees cross at once

	shards  []shard        // the free queue (freequeue.go)
	mask    uint32         // len(shards) - 1
	shift   uint32         // log2(len(shards))
	pending []C.shim_queue // whole-arena calls list the shards' queued frees here
	errs    freeErrors     // queued frees that failed
	lanes   atomic.Uint32  // Lanes made (lane.go)
	// newQueueBuffer allocates a shard's buffer (a test makes it fail).
	newQueueBuffer func() unsafe.Pointer
	closed         atomic.Bool   // for the calls that only ask (Epoch)
	epoch          atomic.Uint64 // the epoch as of the latest Reset (every reset goes through Go)
	name           string
	id             uint64  // zarena_arena_id (Record.ArenaID)
	base           uintptr // the region, cached at New for Contains
	size           uint64
	align          uint64                   // the alignment requests are rounded to
	plan           atomic.Pointer[planView] // the step plan served without crossings (plan.go)
	served         servedCounts             // the allocations the binding served from plans
	planUnwaited   atomic.Bool              // a view was published since the last wait (plan.go)
	cLanes         []*laneC                 // the Lanes with a C lane (lane.go); every shard locked
	gate           planGate                 // the way into the planned path (runtime_*.go)
	// Blocks the Lanes keep (lane_cache.go): whether they may ever (set at New), whether
	// the library lets them now (asked at New, after every step boundary and floor change,
	// and now and then while it refuses), the index of tracked blocks, the budgets.
	keepOK         bool
	keepNow        atomic.Bool
	kept           keptIndex
	keptShardBytes uint64
	keptMaxBlock   uint64
	overflow       overflowState // the overflow route's Go side (overflow.go)
}

// New creates an arena from cfg (see Config for what zero fields mean).
func New(cfg Config) (*Arena, error) { return newArena(cfg, 0) }

// newArena is New with the number of shards of the free queue (0: the default, see
// initShards; tests ask for one to make the order of frees and allocations exact).
func newArena(cfg Config, shards int) (*Arena, error) {
	if err := ready(); err != nil {
		return nil, err
	}
	c, strs, err := cfg.toC()
	if err != nil {
		return nil, err
	}
	arenas.beginCreate()
	r := C.shim_create(c, C.uintptr_t(cfg.Stream))
	if strs != nil {
		C.free(unsafe.Pointer(strs)) // the library copies the strings at create
	}
	if r.status != C.ZARENA_OK {
		arenas.endCreate(nil)
		return nil, callError(r.status, r.err)
	}
	a := &Arena{h: r.arena, poison: c.flags&C.ZARENA_FLAG_POISON != 0, name: cfg.Name,
		base: uintptr(r.base), size: uint64(r.capacity), align: uint64(c.alignment),
		id: arenaID(r.arena)}
	arenas.endCreate(a)
	if a.name == "" {
		if cfg.Set&FieldName == 0 {
			a.name = DefaultConfig().Name // ZARENA_NAME
		}
		if a.name == "" {
			a.name = "zarena"
		}
	}
	a.overflow.diagnoseSync = c.flags&C.ZARENA_FLAG_DIAGNOSE_SYNC != 0
	a.initShards(shards)
	a.initKept(a.overflow.diagnoseSync)
	runtime.SetFinalizer(a, (*Arena).leaked)
	return a, nil
}

// leaked is the finalizer: a backstop for a forgotten Close, not a substitute. It
// reports the leak through the logger and releases the region.
func (a *Arena) leaked() {
	arenas.forget(a)
	if a.closed.Load() {
		return
	}
	emitGo(Record{
		Level: LevelWarn,
		Event: "go.arena_leak",
		Message: fmt.Sprintf("arena %q was garbage-collected without Close; its memory is "+
			"released now, call Close when done with an arena", a.name),
		Arena:   a.name,
		ArenaID: a.id,
	})
	_ = a.destroy()
}

// Close applies the queued frees and destroys the arena: its region, every block and
// every DevicePtr it handed out become invalid. Closing twice is a no-op. The error
// reports a backend failure while releasing; the arena is destroyed anyway. With a Go
// logger set, Close returns once the records emitted so far (the arena's
// "arena.destroy" among them) reached it.
func (a *Arena) Close() error {
	if a == nil {
		return nil
	}
	err := a.destroy()
	if errors.Is(err, ErrClosed) {
		return nil
	}
	runtime.SetFinalizer(a, nil)
	FlushLogs()
	arenas.forget(a) // after the records of the destroy, which name a
	return err
}

func (a *Arena) destroy() error {
	return a.whole("Close", func(h C.uintptr_t) C.shim_result {
		a.dropPlanLocked(true)
		r := C.shim_destroy(h)
		a.closeLocked()
		a.served.release()
		a.releaseOverflowLocked()
		return r
	})
}

// Name is the arena's label in log records.
func (a *Arena) Name() string { return a.name }

// callError is errorFrom for a call that failed in the library: before it returns, the
// records that call logged (an overflow's verdict, say) are handed to the Go logger, so a
// program that exits on the error (log.Fatal) does not lose them.
func callError(status C.zarena_status, msg *C.char) error {
	if status == C.ZARENA_OK {
		return nil
	}
	err := errorFrom(status, msg)
	FlushLogs()
	return err
}

// Alloc allocates n bytes, aligned to the configured alignment, after applying the frees
// queued on the caller's shard (one cgo call for both). n == 0 returns 0 and no error,
// without a call. When the region is full the overflow policy decides; errors:
// ErrOutOfMemory (with the verdict in Error.Verdict when the library gave one),
// ErrCaptureUnsafe, ErrBackend, ErrClosed.
func (a *Arena) Alloc(n uint64) (DevicePtr, error) {
	var frame byte // in the caller's frame: it names the caller's shard (see home)
	return a.alloc(uintptr(unsafe.Pointer(&frame)), n)
}

func (a *Arena) alloc(frame uintptr, n uint64) (DevicePtr, error) {
	if n == 0 {
		return 0, nil
	}
	if a.plan.Load() != nil { // under a step plan: served here when planned (plan.go)
		switch p, _, r := a.allocPlanned(n, 0); r {
		case planServed:
			return p, nil
		case planUnplanned:
			b, err := a.allocCross(frame, n, 0, "Alloc", 1)
			return b.Ptr, err
		}
	}
	if a.overflow.diagnoseSync { // the block's flags say whether it overflowed
		b, err := a.allocCross(frame, n, 0, "Alloc", 0)
		return b.Ptr, err
	}
	i := a.home(frame)
	s := &a.shards[i]
	if !s.mu.TryLock() {
		s = a.lockBusy(i)
	}
	if a.h == 0 {
		s.mu.Unlock()
		return 0, errClosed("Alloc")
	}
	r := C.shim_alloc(a.h, s.buf, C.size_t(s.n), C.uint64_t(n))
	if s.n > 0 {
		a.applied(s, r.queued_failed)
	}
	a.keptCrossed(s)
	s.mu.Unlock()
	if r.status != C.ZARENA_OK || r.queued_failed != 0 {
		return 0, a.allocFailed(r.status, r.err)
	}
	return DevicePtr(r.ptr), nil
}

// allocFailed logs the failed queued frees an allocation applied and returns the
// allocation's own error (nil when only the frees failed).
func (a *Arena) allocFailed(status C.zarena_status, msg *C.char) error {
	a.errs.logPending(a.name, a.id)
	return callError(status, msg)
}

// AllocBlock is Alloc returning the whole Block: pointer, epoch (FreeBlock checks it),
// size, flags, from the same single cgo call.
func (a *Arena) AllocBlock(n uint64) (Block, error) {
	var frame byte
	return a.allocBlock(uintptr(unsafe.Pointer(&frame)), n, 0, "AllocBlock")
}

// AllocTagged is AllocBlock with a tag (RegisterTag): kept with the block, shown in
// live-block dumps and traces.
func (a *Arena) AllocTagged(n uint64, tag Tag) (Block, error) {
	var frame byte
	return a.allocBlock(uintptr(unsafe.Pointer(&frame)), n, tag, "AllocTagged")
}

func (a *Arena) allocBlock(frame uintptr, n uint64, tag Tag, op string) (Block, error) {
	unplanned := C.int(0)
	if a.plan.Load() != nil { // under a step plan: served here when planned (plan.go)
		switch p, epoch, r := a.allocPlanned(n, tag); r {
		case planServed:
			return Block{Ptr: p, Epoch: epoch, Size: (n + a.align - 1) &^ (a.align - 1),
				Flags: BlockPlanned, Tag: tag}, nil
		case planUnplanned:
			unplanned = 1
		}
	}
	return a.allocCross(frame, n, tag, op, unplanned)
}

// allocCross is an allocation's crossing (after the frees queued on the caller's shard);
// unplanned: the plan left the request to the library, which must not ask the plan again.
func (a *Arena) allocCross(frame uintptr, n uint64, tag Tag, op string, unplanned C.int) (Block, error) {
	s := a.lockHome(frame)
	if a.h == 0 {
		s.mu.Unlock()
		return Block{}, errClosed(op)
	}
	r := C.shim_alloc_block(a.h, s.buf, C.size_t(s.n), C.uint64_t(n), C.uint32_t(tag), unplanned)
	if s.n > 0 {
		a.applied(s, r.queued_failed)
	}
	a.keptCrossed(s)
	s.mu.Unlock()
	return a.blockOf(r)
}

// blockOf: the Block a crossing's answer describes, or its error (after the shard's lock
// was let go).
func (a *Arena) blockOf(r C.shim_block_result) (Block, error) {
	if r.status != C.ZARENA_OK || r.queued_failed != 0 {
		if err := a.allocFailed(r.status, r.err); err != nil {
			return Block{}, err
		}
	}
	a.overflowed(BlockFlags(r.flags))
	return Block{Ptr: DevicePtr(r.ptr), Epoch: uint64(r.epoch), Size: uint64(r.size),
		Flags: BlockFlags(r.flags), Tag: Tag(r.tag)}, nil
}

// AllocBatch allocates a block for each of sizes, all with tag (0: none), in one cgo call
// (zarena_alloc_batch) that first applies the frees queued on the caller's shard, and
// writes sizes[i]'s block to blocks[i]. Every item is attempted: on an error, blocks[i] is
// the zero Block for each size that failed and the error is the first failure's (a size
// of 0 gives a zero Block and no error). blocks must hold len(sizes) Blocks
// (ErrInvalidArgument otherwise, with nothing allocated).
func (a *Arena) AllocBatch(sizes []uint64, tag Tag, blocks []Block) error {
	if len(blocks) < len(sizes) {
		return &Error{Status: StatusInvalidArgument, Message: fmt.Sprintf(
			"AllocBatch: %d sizes but room for %d blocks", len(sizes), len(blocks))}
	}
	if len(sizes) == 0 {
		return nil
	}
	var frame byte
	s := a.lockHome(uintptr(unsafe.Pointer(&frame)))
	if a.h == 0 {
		s.mu.Unlock()
		return errClosed("AllocBatch")
	}
	// Both slices are Go memory without Go pointers, read and written during the call only.
	r := C.shim_alloc_batch(a.h, s.buf, C.size_t(s.n),
		(*C.uint64_t)(unsafe.Pointer(&sizes[0])), C.size_t(len(sizes)), C.uint32_t(tag),
		(*C.zarena_block)(unsafe.Pointer(&blocks[0])))
	if s.n > 0 {
		a.applied(s, C.uint32_t(r.queued_failed))
	}
	s.mu.Unlock()
	if a.overflow.diagnoseSync {
		for i := range sizes {
			a.overflowed(blocks[i].Flags)
		}
	}
	a.errs.logPending(a.name, a.id)
	return callError(r.status, r.err)
}

// Free returns p to the arena: queued, without a cgo call, and applied by the next
// crossing of the caller's shard (the goroutine's next Alloc reuses the space exactly as
// if it had been freed now) or by the next whole-arena call; see freequeue.go for the
// ordering. 0 is a no-op. With poison on, the free is applied at once, so the block is
// filled before Free returns. The error is only ErrClosed: a queued free that fails
// (ErrNotOwned, ErrDoubleFree, ErrStale) changes nothing, is counted in Stats, logged
// ("go.free_failed") and kept for FreeErrors; FreeNow reports at once. Safe from
// finalizers and from any number of goroutines.
func (a *Arena) Free(p DevicePtr) error {
	var frame byte // in the caller's frame: it names the caller's shard (see home)
	return a.queueFree(uintptr(unsafe.Pointer(&frame)), p, AnyEpoch, false)
}

// FreeBlock is Free of b.Ptr, checked against b.Epoch when applied: a block of another
// epoch (the address was handed out again after a reset) is left alone and the free
// counts as stale (Stats.StaleFrees, FreeErrors; logged at debug only: it is expected).
// The free for finalizers that may run long after a reset; a finalizer that kept only the
// pointer and the epoch passes Block{Ptr: p, Epoch: epoch}.
func (a *Arena) FreeBlock(b Block) error {
	var frame byte
	return a.queueFree(uintptr(unsafe.Pointer(&frame)), b.Ptr, b.Epoch, false)
}

// FreeNow frees p at once, after every queued free, and returns its status: nil,
// ErrNotOwned (not a block start of this arena), ErrDoubleFree, ErrStale (reclaimed by a
// reset, or, with an epoch other than AnyEpoch, a block of another epoch), ErrClosed.
// None of them changes any state. It waits for every shard: the checked free, not the
// one for hot loops.
func (a *Arena) FreeNow(p DevicePtr, epoch uint64) error {
	return a.whole("FreeNow", func(h C.uintptr_t) C.shim_result {
		a.kept.forgetLocked(uintptr(p)) // the library decides it (lane_cache.go)
		return C.shim_free_at(h, C.uintptr_t(p), C.uint64_t(epoch))
	})
}

// FreeErrors applies every queued free, then returns the most recent queued frees that
// failed (at most 64, oldest first, each a *FreeError that unwraps to ErrDoubleFree,
// ErrNotOwned or ErrStale) and forgets them.
func (a *Arena) FreeErrors() []error {
	if _, err := a.lockAll("FreeErrors"); err == nil {
		a.unlockAll()
	}
	return a.errs.drain()
}

// Reset applies the queued frees, then rewinds the arena to its floor and starts a new
// epoch: every block allocated above the floor since the last reset is reclaimed. It
// fails only on a closed arena, and after a device reset (cudaDeviceReset): the arena's
// memory went with the device's context, nothing is freed, and the error says to Close it
// (zarena.h, "TEARDOWN AFTER A DEVICE RESET").
func (a *Arena) Reset() error { return a.boundary("Reset", true) }

// MarkStepBoundary sets the floor to the current top: what was allocated so far
// (weights, uploaded samples) survives later resets. ErrCaptureUnsafe, nothing changed,
// while a captured graph holds the step plan's zone (graph.go).
func (a *Arena) MarkStepBoundary() error {
	return a.whole("MarkStepBoundary", func(h C.uintptr_t) C.shim_result {
		r := C.shim_mark_step_boundary(h)
		a.keptAskLocked(h) // the floor moved: the plans may learn again (lane_cache.go)
		return r
	})
}

// StepBegin tells the arena a step begins (zarena_step_begin): the diagnosis then knows,
// rather than guesses, that steps repeat without a reset. Step calls it.
func (a *Arena) StepBegin() error { return a.boundary("StepBegin", false) }

// boundary is StepBegin's crossing, or Reset's (reset): in a planned steady state with
// shard 0 alone (lockQuiet, freequeue.go) when the library's answers change nothing the
// binding holds, else with every shard locked, as a whole-arena call.
func (a *Arena) boundary(op string, reset bool) error {
	var h C.uintptr_t
	quiet := a.lockQuiet()
	if quiet {
		h = a.h
	} else {
		var err error
		if h, err = a.lockAll(op); err != nil {
			return err
		}
	}
	var r C.shim_epoch_result
	if reset {
		r = C.shim_reset(h, a.keptAsk())
		if r.r.status == C.ZARENA_OK {
			a.epoch.Store(uint64(r.epoch))
		}
	} else {
		r = C.shim_step_begin(h, a.keptAsk())
	}
	if quiet {
		if r.r.status == C.ZARENA_OK && (!reset || a.kept.used.Load() == 0) &&
			a.sameBoundaryLocked(r.view, r.kept) {
			if reset {
				a.kept.atMax.Store(false) // clearLocked's part for an empty index
			}
			a.shards[0].mu.Unlock()
			return nil
		}
		a.lockRestLocked()
	}
	if reset {
		a.kept.clearLocked() // the index holds the epoch's blocks only (lane_cache.go)
	}
	a.keptAnswerLocked(r.kept)
	a.setPlanLocked(r.view)
	a.unlockAll()
	return callError(r.r.status, r.r.err)
}

// Epoch is the number of resets since create (0 after Close). No cgo call: every reset
// goes through this Arena, which keeps the count.
func (a *Arena) Epoch() uint64 {
	if a.closed.Load() {
		return 0
	}
	return a.epoch.Load()
}

// Backend is the backend the arena actually uses (Auto resolves at create); -1 after
// Close.
func (a *Arena) Backend() Backend {
	bk := Backend(-1)
	_ = a.whole("Backend", func(h C.uintptr_t) C.shim_result {
		bk = Backend(C.shim_backend(h))
		return C.shim_result{}
	})
	return bk
}

// Step runs one step: StepBegin, step, then a Reset, also when step returns an error or
// panics (the panic continues after the reset). The error joins step's error and the
// reset's (StatusOf, DiagnosisOf, errors.Is and errors.As see through the join).
func (a *Arena) Step(step func() error) (err error) {
	defer func() {
		if rerr := a.Reset(); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	if berr := a.StepBegin(); berr != nil {
		return berr
	}
	return step()
}
