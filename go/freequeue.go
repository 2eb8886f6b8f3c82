package zarena

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Queued frees: one crossing per tensor, and goroutines that do not wait for each other.
//
// Free does not call C: it appends the block to a buffer and returns. The buffers are
// sharded: an arena has a power of two of shards, at least twice GOMAXPROCS at New, each
// with its own lock and its own buffer (C memory, allocated at the shard's first free; the
// C side never sees Go memory), each on cache lines of its own. A call finds its shard
// from an address in its caller's stack frame (home): goroutines never share one unless
// the shards run out, and a shard another goroutine holds is passed by for the next one,
// so the common path takes no lock that another running goroutine takes. (A sync.Pool of
// shard pointers, per P inside the runtime, was measured as the hint: its Get and Put cost
// more instructions per alloc+free pair than the rest of the pair's Go side together.)
//
// An allocation holds its shard's lock across its crossing and applies the shard's queued
// frees first, in the order they were queued, then allocates, in the same crossing
// (zarena_free_then_alloc: the space is reused exactly as if each free had been a call of
// its own). A full buffer (freeQueueCap frees) is applied at once.
//
// Whole-arena calls (Reset, Close, Stats, SetFloor, MarkStepBoundary, LiveBlocks,
// RegionInfo, ...) and the calls that check one block (FreeNow, Pin, Unpin) take every
// shard's lock, in shard order, apply every queued free, then make their own call: no other
// crossing runs beside them. Close therefore never races a crossing: each crossing holds a
// shard lock, and Close holds them all; after it, every shard refuses.
//
// Ordering:
//   - A Free that happens before a whole-arena or block call (the same goroutine, or one
//     synchronised with it) is applied before that call: Free(p) then Reset() frees p before
//     the reset, whichever goroutine freed it; Free(p) then Pin(p) is a double free.
//   - An allocation applies the frees queued on its shard: those queued there since the
//     shard last crossed, which include the goroutine's own frees just before it unless
//     they landed on another shard (a held shard passed by, a call from elsewhere on its
//     stack); those are applied by the next crossing of their shard, or the next
//     whole-arena call. A free not applied yet only keeps its space from being reused.
//   - A free racing a reset (no happens-before either way) may land on either side.
//
// Poison: while poison is on, frees do not wait: Free crosses at once (under its shard's
// lock), so the block is filled before Free returns.
//
// Errors: a queued free that fails (double free, foreign pointer, stale) changes nothing,
// as the synchronous call would not; the library counts it (Stats' InvalidFrees and
// StaleFrees), the arena keeps the most recent ones (FreeErrors) and logs a
// "go.free_failed" record for the first few and then at every power of two: a warning,
// except for a stale free that named its epoch (FreeBlock: a finalizer that ran after the
// reset, the check doing its job), which is logged at debug. FreeNow reports at once.
const (
	freeQueueCap     = int(C.SHIM_QUEUE_CAP)
	freeErrorsKept   = 64 // FreeErrors keeps the most recent failures
	freeErrorsLogged = 8  // logged one by one; then at 16, 32, 64, ... failures
	shardBytes       = 128
)

// shardState is one shard of an arena's free queue; mu guards every field.
type shardState struct {
	mu sync.Mutex
	n  int // frees queued in buf
	// limit is how many frees the shard may hold now: freeQueueCap, or 0 while frees may
	// not wait (the arena is closed, poison is on) or before buf exists. One comparison on
	// Free's fast path covers all of them.
	limit      int
	buf        C.uintptr_t           // C memory: freeQueueCap items, then their statuses (0: none yet)
	items      []C.shim_free_item    // buf's items
	statuses   []C.zarena_status     // and their statuses, written by the crossing that applies them
	idx        uint32                // the shard's index in Arena.shards
	rep        *C.zarena_kept_report // buf's report of the blocks kept here (lane_cache.go)
	cache      *laneCache            // the blocks kept here; nil until a Lane keeps one
	queued     uint64                // frees queued, ever (tests)
	keptServed uint64                // allocations served from kept blocks, ever (tests)
	crossings  uint64                // crossings while keeping was refused (keptCrossed)
	batches    uint64                // crossings that applied frees of this shard (tests)
	busy       uint64                // calls that took this shard because their home was held
	// work: the shard may hold something for the library (queued frees, a report's counts,
	// kept blocks). Set under mu whenever one is added; cleared under mu when a crossing
	// left it empty. Read without mu by a planned steady state's boundary (lockQuiet): it
	// needs no shard that has nothing to hand over.
	work atomic.Bool
}

// worked marks s as holding something for the library (s locked).
func (s *shard) worked() {
	if !s.work.Load() {
		s.work.Store(true)
	}
}

// idleLocked clears s's work mark when it holds nothing for the library (s locked).
func (s *shard) idleLocked() {
	if s.n == 0 && !s.reportPending() && (s.cache == nil || s.cache.count == 0) && s.work.Load() {
		s.work.Store(false)
	}
}

// shard pads shardState to cache lines of its own (two: the adjacent-line prefetcher pairs
// them), so shards used on different cores never share one.
type shard struct {
	shardState
	_ [shardBytes - unsafe.Sizeof(shardState{})%shardBytes]byte
}

// newQueueBuffer allocates a queue buffer (nil when C memory ran out).
func newQueueBuffer() unsafe.Pointer { return unsafe.Pointer(C.shim_queue_alloc()) }

// shardsPerProc is how many shards an arena has per GOMAXPROCS at New, at least (rounded
// up to a power of two). More make two goroutines' homes meet less often (the benchmarks'
// busy/op counts it) and every whole-arena call take more locks.
const shardsPerProc = 2

// initShards gives the arena n shards, a power of two (0: the default, shardsPerProc x
// GOMAXPROCS rounded up).
func (a *Arena) initShards(n int) {
	if n <= 0 {
		n = 1 << bits.Len(uint(shardsPerProc*runtime.GOMAXPROCS(0)-1))
	}
	a.shards = make([]shard, n)
	for i := range a.shards {
		a.shards[i].idx = uint32(i)
	}
	a.pending = make([]C.shim_queue, n)
	a.mask = uint32(n - 1)
	a.shift = uint32(bits.Len(uint(n - 1)))
	a.newQueueBuffer = newQueueBuffer
}

// shardProbes is how many shards a call tries before it waits for its own.
const shardProbes = 4

// home is the index of the calling goroutine's shard, named by frame, an address on its
// stack, 2 KiB at a time (the smallest goroutine stack): goroutines never share a bucket,
// and calls of one goroutine from one place, at about the same depth, see the same one.
// The exported methods take frame from a local of their own and are small enough to be
// inlined, so it lies in their caller's frame: an Alloc and a Free made from one function
// (or from functions at one depth) find the same shard, and the Alloc applies the frees
// the goroutine just queued. The bucket's higher bits are folded in, so stacks a multiple
// of the shard count of buckets apart still part. A call locks its shard with
//
//	s := &a.shards[i]
//	if !s.mu.TryLock() {
//		s = a.lockBusy(i)
//	}
func (a *Arena) home(frame uintptr) uint32 {
	b := uint32(frame >> 11)
	return (b ^ b>>a.shift) & a.mask
}

// lockHome locks the caller's shard, or one beside it when that one is held; frame is an
// address in the caller's frame. Alloc and Free inline the same steps: the call costs on
// their fast path.
func (a *Arena) lockHome(frame uintptr) *shard {
	i := a.home(frame)
	s := &a.shards[i]
	if !s.mu.TryLock() {
		s = a.lockBusy(i)
	}
	return s
}

// lockBusy locks a shard when shard i, the caller's home, is held by another goroutine: the
// next shards are tried, so two goroutines that share a stack bucket do not wait for each
// other; only when shardProbes shards are all held (a whole-arena call holds every one)
// does it wait, for its home.
func (a *Arena) lockBusy(i uint32) *shard {
	// With fewer shards than probes a probe comes round to the home itself: a TryLock that
	// takes it is the lock (never Lock it again on top).
	for k := uint32(1); k < shardProbes; k++ {
		if t := &a.shards[(i+k)&a.mask]; t.mu.TryLock() {
			t.busy++ // counted on the shard it locked: no write shared between shards
			return t
		}
	}
	s := &a.shards[i]
	s.mu.Lock()
	s.busy++
	return s
}

// queueFree is Free and FreeBlock; frame is an address in their caller's frame (see home);
// lane: a Lane's, which may keep the block (lane_cache.go).
func (a *Arena) queueFree(frame uintptr, p DevicePtr, epoch uint64, lane bool) error {
	// Under a step plan, the plain free of a planned block is done here (plan.go).
	if a.plan.Load() != nil && a.freePlanned(p, epoch) {
		return nil
	}
	// A block a Lane handed out is decided first, under its owner's lock: kept, refused, or
	// on to the queue (lane_cache.go).
	if a.kept.used.Load() != 0 && p != 0 {
		if done, err := a.freeTracked(p, epoch, lane); done {
			return err
		}
	}
	return a.queueFreeUntracked(frame, p, epoch)
}

// queueFreeUntracked is queueFree of a block no Lane tracks (or no longer).
func (a *Arena) queueFreeUntracked(frame uintptr, p DevicePtr, epoch uint64) error {
	i := a.home(frame)
	s := &a.shards[i]
	if !s.mu.TryLock() {
		s = a.lockBusy(i)
	}
	if p == 0 || s.n >= s.limit {
		err := a.freeUnqueued(s, p, epoch)
		s.mu.Unlock()
		a.errs.logPending(a.name, a.id)
		return err
	}
	s.items[s.n] = C.shim_free_item{ptr: C.uintptr_t(p), epoch: C.uint64_t(epoch)}
	s.n++
	s.queued++
	s.worked()
	if s.n < s.limit {
		s.mu.Unlock()
		return nil
	}
	a.applyShard(s) // full: applied at once
	s.mu.Unlock()
	a.errs.logPending(a.name, a.id)
	return nil
}

// freeUnqueued is a free that cannot be queued as it stands, with s locked: the arena is
// closed, p is 0, poison is on (the free crosses now), or the shard has no buffer yet (one
// is made; when C memory ran out, the free crosses now). Crossing under the shard's lock
// keeps Close from destroying the arena meanwhile.
func (a *Arena) freeUnqueued(s *shard, p DevicePtr, epoch uint64) error {
	if a.h == 0 {
		return errClosed("Free")
	}
	if p == 0 {
		return nil
	}
	if !a.poison && s.buf == 0 && a.newShardBuffer(s) {
		s.items[0] = C.shim_free_item{ptr: C.uintptr_t(p), epoch: C.uint64_t(epoch)}
		s.n = 1
		s.queued++
		s.worked()
		return nil
	}
	r := C.shim_free_at(a.h, C.uintptr_t(p), C.uint64_t(epoch))
	if r.status != C.ZARENA_OK {
		C.free(unsafe.Pointer(r.err))
		a.errs.record(&FreeError{Ptr: p, Epoch: epoch, Status: Status(r.status)})
	}
	return nil
}

// applyShard applies s's queued frees in a crossing of their own (s locked, the arena open).
func (a *Arena) applyShard(s *shard) {
	a.applied(s, C.shim_apply(a.h, s.buf, C.size_t(s.n)))
}

// applied empties s after a crossing applied its frees, recording the failed ones (s locked).
func (a *Arena) applied(s *shard, failed C.uint32_t) {
	if failed > 0 {
		a.recordFailed(s)
	}
	s.batches++
	s.n = 0
	s.idleLocked()
}

func (a *Arena) recordFailed(s *shard) {
	for i, st := range s.statuses[:s.n] {
		if st != C.ZARENA_OK {
			it := s.items[i]
			a.errs.record(&FreeError{Ptr: DevicePtr(it.ptr), Epoch: uint64(it.epoch),
				Status: Status(st)})
		}
	}
}

// reportPending: the shard's report of kept blocks holds counts the library has not seen
// (s locked; the crossing that applies its queue hands them over).
func (s *shard) reportPending() bool {
	return s.rep != nil && s.rep.allocs|s.rep.invalid_frees|s.rep.stale_frees != 0
}

// lockShards takes every shard's lock, in order; unlockShards releases them.
func (a *Arena) lockShards() {
	for i := range a.shards {
		a.shards[i].mu.Lock()
	}
}

func (a *Arena) unlockShards() {
	for i := len(a.shards) - 1; i >= 0; i-- {
		a.shards[i].mu.Unlock()
	}
}

// lockAll takes every shard's lock and applies every queued free (one crossing for all),
// then returns the handle; ErrClosed, with nothing held, for a closed arena. unlockAll
// releases it.
func (a *Arena) lockAll(op string) (C.uintptr_t, error) {
	a.lockShards()
	if a.h == 0 {
		a.unlockShards()
		return 0, errClosed(op)
	}
	// One pass: each shard's kept blocks join its queue (giveBackKeptLocked, shard by
	// shard), then the shard is listed if it has anything for the library. A whole-arena
	// call of a planned steady state (StepBegin, Reset) finds nothing: this loop and the
	// locks are all it pays here, so they are one loop.
	k := 0
	for i := range a.shards {
		s := &a.shards[i]
		if s.cache != nil && s.cache.count != 0 {
			a.giveBackShardKeptLocked(s)
		}
		if s.n > 0 || s.reportPending() {
			a.pending[k] = C.shim_queue{buf: s.buf, n: C.size_t(s.n)}
			k++
		} else {
			s.idleLocked() // a mark left by a report a crossing sent, or a cache emptied
		}
	}
	if k == 0 {
		return a.h, nil
	}
	C.shim_apply_queues(a.h, &a.pending[0], C.size_t(k))
	k = 0
	for i := range a.shards {
		if s := &a.shards[i]; s.n > 0 || s.reportPending() {
			a.applied(s, a.pending[k].failed)
			k++
		}
	}
	return a.h, nil
}

func (a *Arena) unlockAll() {
	a.unlockShards()
	a.errs.logPending(a.name, a.id)
}

// lockQuiet takes shard 0's lock alone, for the boundary of a planned steady state
// (StepBegin, Reset), and says so (true) when that is all the boundary needs: the arena is
// open, a plan view is cached, the arena has no C Lane (whose views a boundary fetches),
// keeping is off (and stays off: it turns on only under shard 0's lock, keptCrossed), and no
// shard has anything to hand over (shard.work: every free queued before the call, every
// kept block, every report). Close and every whole-arena call lock shard 0 first, so none
// runs meanwhile, and what they change (h, poison, the Lanes) holds still. false: nothing
// is held, and the caller takes the whole path. After the crossing, lockRestLocked turns
// it into every shard locked (the order holds: shard 0 is the first) when the answers
// change what the binding holds.
func (a *Arena) lockQuiet() bool {
	s0 := &a.shards[0]
	s0.mu.Lock()
	if a.h != 0 && a.plan.Load() != nil && len(a.cLanes) == 0 && !a.keepNow.Load() {
		quiet := true
		for i := range a.shards {
			if a.shards[i].work.Load() {
				quiet = false
				break
			}
		}
		if quiet {
			return true
		}
	}
	s0.mu.Unlock()
	return false
}

// lockRestLocked locks every shard but shard 0, which lockQuiet holds.
func (a *Arena) lockRestLocked() {
	for i := 1; i < len(a.shards); i++ {
		a.shards[i].mu.Lock()
	}
}

// sameBoundaryLocked: the library's answers at a boundary (its plan view, whether the
// binding may keep blocks) change nothing the binding holds (shard 0 locked, after
// lockQuiet: keeping is off).
func (a *Arena) sameBoundaryLocked(v *C.zarena_plan_view, kept C.int) bool {
	cur := a.plan.Load()
	return cur != nil && cur.view == v && !a.poison && (!a.keepOK || kept == 0)
}

// whole makes call with every shard locked, after every queued free was applied: nothing
// else crosses meanwhile, and Close cannot begin until it returns. The error is call's
// (callError), or ErrClosed.
func (a *Arena) whole(op string, call func(h C.uintptr_t) C.shim_result) error {
	h, err := a.lockAll(op)
	if err != nil {
		return err
	}
	r := call(h)
	a.unlockAll()
	return callError(r.status, r.err)
}

// wholeValue is whole for a call that reads a snapshot: get makes the shim call and
// returns its result with the status inside it (a shim_*_result's r), and convert turns a
// successful result into the Go value. On an error it returns the zero T.
func wholeValue[R, T any](a *Arena, op string, get func(h C.uintptr_t) (R, C.shim_result),
	convert func(r *R) T) (T, error) {
	var r R
	err := a.whole(op, func(h C.uintptr_t) C.shim_result {
		var s C.shim_result
		r, s = get(h)
		return s
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return convert(&r), nil
}

// closeLocked makes every shard refuse and gives the buffers back (every shard locked, the
// arena just destroyed).
func (a *Arena) closeLocked() {
	a.h = 0
	for _, c := range a.cLanes { // destroyed with the arena
		c.h = 0
	}
	a.cLanes = nil
	a.closed.Store(true)
	for i := range a.shards {
		s := &a.shards[i]
		if s.buf != 0 {
			C.shim_queue_free(s.buf)
		}
		s.buf, s.items, s.statuses, s.n, s.limit, s.rep, s.cache = 0, nil, nil, 0, 0, nil, nil
	}
	a.kept.release()
}

// setPoisonLocked records whether frees must cross at once (every shard locked, every queue
// applied).
func (a *Arena) setPoisonLocked(on bool) {
	a.poison = on
	for i := range a.shards {
		if s := &a.shards[i]; s.buf != 0 {
			s.limit = freeQueueCap
			if on {
				s.limit = 0
			}
		}
	}
}

// queueCounts returns the frees queued and the crossings that applied some, over every
// shard (tests).
func (a *Arena) queueCounts() (queued, batches uint64) {
	a.lockShards()
	defer a.unlockShards()
	for i := range a.shards {
		queued += a.shards[i].queued
		batches += a.shards[i].batches
	}
	return queued, batches
}

// busyCount is how many calls found their home held, over every shard (benchmarks).
func (a *Arena) busyCount() (n uint64) {
	a.lockShards()
	defer a.unlockShards()
	for i := range a.shards {
		n += a.shards[i].busy
	}
	return n
}

// freeErrors keeps the failures of queued frees and logs them.
type freeErrors struct {
	mu       sync.Mutex
	kept     []*FreeError // ring of the most recent
	next     int
	count    uint64         // failures ever
	unlogged []failureToLog // recorded under a shard lock, logged once it is released
	toLog    atomic.Bool    // unlogged is not empty
}

type failureToLog struct {
	fe    *FreeError
	count uint64 // failures so far, this one included
}

// record keeps fe and notes whether it is to be logged (logPending logs it).
func (e *freeErrors) record(fe *FreeError) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.count++
	if len(e.kept) < freeErrorsKept {
		e.kept = append(e.kept, fe)
	} else {
		e.kept[e.next] = fe
		e.next = (e.next + 1) % freeErrorsKept
	}
	if e.count <= freeErrorsLogged || bits.OnesCount64(e.count) == 1 {
		e.unlogged = append(e.unlogged, failureToLog{fe, e.count})
		e.toLog.Store(true)
	}
}

// logPending logs what record noted, with no shard lock held (the logger may block).
func (e *freeErrors) logPending(arena string, id uint64) {
	if !e.toLog.Load() {
		return
	}
	e.mu.Lock()
	recs := e.unlogged
	e.unlogged = nil
	e.toLog.Store(false)
	e.mu.Unlock()
	for _, r := range recs {
		fe := r.fe
		// A stale epoch-checked free is the check doing its job (a finalizer that ran
		// after the reset): debug. The others are bugs in the caller: warn.
		level := LevelWarn
		if fe.Status == StatusStale && fe.Epoch != AnyEpoch {
			level = LevelDebug
		}
		emitGo(Record{
			Level: level,
			Event: "go.free_failed",
			Message: fmt.Sprintf("%v (%d queued frees of this arena failed so far; "+
				"Arena.FreeErrors lists the latest, FreeNow reports at once)", fe, r.count),
			Arena:   arena,
			ArenaID: id,
		})
	}
}

// drain returns the kept failures, oldest first, and forgets them.
func (e *freeErrors) drain() []error {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]error, 0, len(e.kept))
	for i := range e.kept {
		out = append(out, e.kept[(e.next+i)%len(e.kept)])
	}
	e.kept, e.next = nil, 0
	return out
}
