package zarena

/*
#include "shim.h"

static inline uint64_t shim_epoch(const zarena* a) { return zarena_epoch(a); }
static inline int32_t shim_backend(const zarena* a) { return zarena_backend(a); }
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

// AnyEpoch as an epoch checks nothing: FreeAt(p, AnyEpoch) is Free(p) (ZARENA_ANY_EPOCH).
const AnyEpoch = ^uint64(0)

// BlockFlags describe an allocation (ZARENA_BLOCK_*).
type BlockFlags uint32

const (
	BlockOverflow BlockFlags = 0x1 // from the overflow pool
	BlockReused   BlockFlags = 0x2 // a freed block was reused (no new bump space)
)

// Block is what AllocBlock hands out: the pointer, the epoch it belongs to (for FreeAt),
// its size (the request rounded up to the alignment), flags and tag, all from the one
// crossing that allocated it.
type Block struct {
	Ptr   DevicePtr
	Epoch uint64
	Size  uint64
	Flags BlockFlags
	Tag   Tag
}

// Arena is one zarena arena. Every method may be called from many goroutines at once.
// Reset may run concurrently with the others, but no goroutine may still use a block
// that the reset reclaims. Close needs exclusive use: no other call may be in flight or
// start afterwards (Free, including from finalizers, is the exception: after Close it
// returns an error and does nothing).
type Arena struct {
	q     freeQueue
	name  string
	base  uintptr // the region, cached at New for Contains
	size  uint64
	epoch atomic.Uint64 // the epoch as of the latest Reset (every reset goes through Go)
}

// New creates an arena from cfg (see Config for what zero fields mean).
func New(cfg Config) (*Arena, error) {
	if err := ready(); err != nil {
		return nil, err
	}
	c, strs, err := cfg.toC()
	if err != nil {
		return nil, err
	}
	r := C.shim_create(c, C.uintptr_t(cfg.Stream))
	if strs != nil {
		C.free(unsafe.Pointer(strs)) // the library copies the strings at create
	}
	if err := callError(r.status, r.err); err != nil {
		return nil, err
	}
	a := &Arena{name: cfg.Name, base: uintptr(r.base), size: uint64(r.capacity)}
	if a.name == "" {
		if cfg.Set&FieldName == 0 {
			a.name = DefaultConfig().Name // ZARENA_NAME
		}
		if a.name == "" {
			a.name = "zarena"
		}
	}
	a.q.init(r.arena, a.name)
	runtime.SetFinalizer(a, (*Arena).leaked)
	return a, nil
}

// leaked is the finalizer: a backstop for a forgotten Close, not a substitute. It
// reports the leak through the logger and releases the region.
func (a *Arena) leaked() {
	b, h, err := a.q.takeExclusive("Close", true)
	if err != nil {
		return
	}
	emitGo(Record{
		Level: LevelWarn,
		Event: "go.arena_leak",
		Message: fmt.Sprintf("arena %q was garbage-collected without Close; its memory is "+
			"released now, call Close when done with an arena", a.name),
		Arena: a.name,
	})
	q, nq, qs := b.cargs()
	r := C.shim_destroy(h, q, nq, qs)
	a.q.release(b, r.qfailed)
	a.q.freeBuffers()
	_ = errorFrom(r.status, r.err)
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
	b, h, err := a.q.takeExclusive("Close", true)
	if err != nil {
		return nil // closed already
	}
	runtime.SetFinalizer(a, nil)
	q, nq, qs := b.cargs()
	r := C.shim_destroy(h, q, nq, qs)
	a.q.release(b, r.qfailed)
	a.q.freeBuffers()
	FlushLogs()
	return errorFrom(r.status, r.err)
}

// Name is the arena's label in log records.
func (a *Arena) Name() string { return a.name }

// keepAlive keeps the finalizer from destroying the arena while one of its C calls
// is still running (a is otherwise dead once the handle has been loaded).
func keepAlive(a *Arena) { runtime.KeepAlive(a) }

func errClosed(op string) error {
	return &Error{Status: StatusInvalidArgument, Message: op + ": the arena is closed"}
}

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

// Alloc allocates n bytes, aligned to the configured alignment, after applying the
// queued frees (one cgo call for both). n == 0 returns 0 and no error, without a call.
// When the region is full the overflow policy decides; errors: ErrOutOfMemory (with the
// verdict in Error.Verdict when the library gave one), ErrCaptureUnsafe, ErrBackend,
// ErrInvalidArgument (closed arena).
func (a *Arena) Alloc(n uint64) (DevicePtr, error) {
	if n == 0 {
		return 0, nil
	}
	b, err := a.alloc(n, 0, "Alloc")
	return b.Ptr, err
}

// AllocBlock is Alloc returning the whole Block: pointer, epoch (for FreeAt), size,
// flags, from the same single cgo call.
func (a *Arena) AllocBlock(n uint64) (Block, error) { return a.alloc(n, 0, "AllocBlock") }

// AllocTagged is AllocBlock with a tag (RegisterTag): kept with the block, shown in
// live-block dumps and traces.
func (a *Arena) AllocTagged(n uint64, tag Tag) (Block, error) {
	return a.alloc(n, tag, "AllocTagged")
}

func (a *Arena) alloc(n uint64, tag Tag, op string) (Block, error) {
	b, h, err := a.q.take(op)
	if err != nil {
		return Block{}, err
	}
	// The handle travels as an integer: cgo checks a pointer to an incomplete C type
	// on every call (it cannot know what it holds), an integer it does not.
	var r C.shim_block_result
	if b == nil {
		r = C.shim_alloc(C.uintptr_t(uintptr(unsafe.Pointer(h))), nil, 0, nil, C.uint64_t(n),
			C.uint32_t(tag))
	} else {
		q, nq, qs := b.cargs()
		r = C.shim_alloc(C.uintptr_t(uintptr(unsafe.Pointer(h))), q, nq, qs, C.uint64_t(n),
			C.uint32_t(tag))
		a.q.release(b, r.qfailed)
	}
	keepAlive(a)
	if r.status != C.ZARENA_OK {
		return Block{}, callError(r.status, r.err)
	}
	return Block{Ptr: DevicePtr(r.ptr), Epoch: uint64(r.epoch), Size: uint64(r.size),
		Flags: BlockFlags(r.flags), Tag: Tag(r.tag)}, nil
}

// Free queues p to be returned to the arena and returns at once, without a cgo call (0
// is a no-op). The free is applied, in order, at the start of the next call that acts
// on the arena (the next Alloc reuses the space exactly as if it had been freed now) or
// when the queue fills; see FreeNow for a free that reports its outcome. The error is
// only that of a closed arena: a queued free that fails (ErrNotOwned, ErrDoubleFree,
// ErrStale) changes nothing, is counted in Stats, logged ("go.free_failed") and kept
// for FreeErrors. Safe from finalizers and from any number of goroutines.
func (a *Arena) Free(p DevicePtr) error { return a.FreeAt(p, AnyEpoch) }

// FreeAt queues an epoch-checked free, as Free does: applied, p is freed only if the
// block at p was handed out in epoch (AllocBlock's Block.Epoch); a block of another
// epoch (the address was handed out again after a reset) is left alone and the free
// counts as stale (Stats.StaleFrees, FreeErrors; logged at debug only: it is expected).
// This is the free for finalizers that may run long after a reset.
func (a *Arena) FreeAt(p DevicePtr, epoch uint64) error {
	if p == 0 {
		if a.closed() {
			return errClosed("Free")
		}
		return nil
	}
	full, h, sync, err := a.q.push(p, epoch)
	if err != nil {
		return err
	}
	if sync { // no queue buffer (C memory ran out): free now, reporting as a queued free would
		r := C.shim_free_at(h, nil, 0, nil, C.uintptr_t(p), C.uint64_t(epoch))
		keepAlive(a)
		if r.status != C.ZARENA_OK {
			fb := freeBuf{items: []C.shim_free_item{{ptr: C.uintptr_t(p), epoch: C.uint64_t(epoch)}},
				statuses: []C.zarena_status{r.status}, n: 1}
			C.free(unsafe.Pointer(r.err))
			a.q.recordFailures(&fb)
		}
		return nil
	}
	if full != nil {
		q, nq, qs := full.cargs()
		r := C.shim_flush(h, q, nq, qs)
		a.q.release(full, r.qfailed)
		keepAlive(a)
	}
	return nil
}

// FreeBlock queues the epoch-checked free of b: FreeAt(b.Ptr, b.Epoch).
func (a *Arena) FreeBlock(b Block) error { return a.FreeAt(b.Ptr, b.Epoch) }

// FreeNow frees p at once (after the queued frees, in the same cgo call) and returns its
// status: ErrNotOwned (not a block start of this arena), ErrDoubleFree, ErrStale
// (reclaimed by a reset; dropped). None of them changes any state.
func (a *Arena) FreeNow(p DevicePtr) error { return a.FreeAtNow(p, AnyEpoch) }

// FreeAtNow is FreeAt, applied at once, returning the free's status (ErrStale when the
// block at p belongs to another epoch).
func (a *Arena) FreeAtNow(p DevicePtr, epoch uint64) error {
	b, h, err := a.q.take("FreeNow")
	if err != nil {
		return err
	}
	q, nq, qs := b.cargs()
	r := C.shim_free_at(h, q, nq, qs, C.uintptr_t(p), C.uint64_t(epoch))
	if b != nil {
		a.q.release(b, r.qfailed)
	}
	keepAlive(a)
	if r.status != C.ZARENA_OK {
		return errorFrom(r.status, r.err) // counted in stats; nothing else was logged
	}
	return nil
}

// Flush applies the queued frees now (each Alloc, Reset, Stats... does it anyway).
func (a *Arena) Flush() error {
	b, h, err := a.q.takeExclusive("Flush", false)
	if err != nil {
		return err
	}
	q, nq, qs := b.cargs()
	r := C.shim_flush(h, q, nq, qs)
	a.q.release(b, r.qfailed)
	keepAlive(a)
	return nil
}

// FreeErrors returns the most recent queued frees that failed (at most 64, oldest
// first, each a *FreeError that unwraps to ErrDoubleFree, ErrNotOwned or ErrStale) and
// forgets them. Frees still queued have not failed yet: Flush first to include them.
func (a *Arena) FreeErrors() []error { return a.q.drainErrors() }

// FreeErrorCount is the number of queued frees of this arena that failed, ever.
func (a *Arena) FreeErrorCount() uint64 { return a.q.failed.Load() }

// Reset applies the queued frees, then rewinds the arena to its floor and starts a new
// epoch: every block allocated above the floor since the last reset is reclaimed. It
// fails only on a closed arena.
func (a *Arena) Reset() error {
	b, h, err := a.q.takeExclusive("Reset", false)
	if err != nil {
		return err
	}
	q, nq, qs := b.cargs()
	r := C.shim_reset(h, q, nq, qs)
	a.q.release(b, r.qfailed)
	keepAlive(a)
	if r.status == C.ZARENA_OK {
		e := uint64(r.epoch)
		for cur := a.epoch.Load(); cur < e && !a.epoch.CompareAndSwap(cur, e); cur = a.epoch.Load() {
		}
	}
	return callError(r.status, r.err)
}

// MarkStepBoundary sets the floor to the current top: what was allocated so far
// (weights, uploaded samples) survives later resets.
func (a *Arena) MarkStepBoundary() error {
	b, h, err := a.q.takeExclusive("MarkStepBoundary", false)
	if err != nil {
		return err
	}
	q, nq, qs := b.cargs()
	r := C.shim_mark_step_boundary(h, q, nq, qs)
	a.q.release(b, r.qfailed)
	keepAlive(a)
	return callError(r.status, r.err)
}

// StepBegin tells the arena a step begins (zarena_step_begin): the diagnosis then knows,
// rather than guesses, that steps repeat without a reset. Step calls it.
func (a *Arena) StepBegin() error {
	b, h, err := a.q.take("StepBegin")
	if err != nil {
		return err
	}
	q, nq, qs := b.cargs()
	r := C.shim_step_begin(h, q, nq, qs)
	if b != nil {
		a.q.release(b, r.qfailed)
	}
	keepAlive(a)
	return callError(r.status, r.err)
}

// Epoch is the number of resets since create (0 after Close). No cgo call: every reset
// goes through this Arena, which keeps the count.
func (a *Arena) Epoch() uint64 {
	if a.closed() {
		return 0
	}
	return a.epoch.Load()
}

func (a *Arena) closed() bool {
	a.q.mu.Lock()
	defer a.q.mu.Unlock()
	return a.q.h == nil
}

// Backend is the backend the arena actually uses (Auto resolves at create); -1 after
// Close.
func (a *Arena) Backend() Backend {
	a.q.mu.Lock()
	h := a.q.h
	a.q.mu.Unlock()
	if h == nil {
		return -1
	}
	bk := Backend(C.shim_backend(h))
	keepAlive(a)
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
