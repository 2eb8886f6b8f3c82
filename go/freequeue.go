package zarena

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Queued frees (one cgo crossing per tensor).
//
// Arena.Free does not call C: it appends the block to a small per-arena buffer and
// returns. The next crossing that acts on the arena takes the buffer and applies its
// frees first, in the order they were queued, then does its own work, in the same C
// call: Alloc through zarena_free_then_alloc (so the freed space is reused exactly as if
// each Free had been a call of its own), Reset, Stats, MarkStepBoundary, Close and every
// other arena call likewise; a full buffer (freeQueueCap frees) is applied at once.
//
// The buffers are C memory (the C side never sees Go memory), and a buffer is handed
// to exactly one crossing: the taker swaps in a spare under the queue's lock and crosses
// without holding it, so allocations on many goroutines still run in parallel in C.
//
// Ordering. Frees queued before a call are applied before it, with one refinement for
// batches that another goroutine took and has not applied yet (it is in its crossing):
// whole-arena calls (Reset, MarkStepBoundary, SetFloor, Stats, RegionInfo, LiveBlocks,
// Close) first wait until every batch taken before them was applied, and allocations
// that would take a new batch meanwhile wait for them; so "Free(p) happens before
// Reset()" in the program means p is freed before the reset, whichever goroutine
// applies it. A free racing with a reset on another goroutine (no happens-before
// between them) may land on either side, as with synchronous frees.
//
// Errors. A queued free that fails (double free, foreign pointer, stale) changes
// nothing, as the synchronous call would not; the library counts it (Stats'
// InvalidFrees and StaleFrees), the binding keeps the most recent ones (FreeErrors)
// and counts them all (FreeErrorCount), and logs a "go.free_failed" record for the
// first few and then at every power of two: a warning, except for a stale free that
// named its epoch (FreeAt, FreeBlock: a finalizer that ran after the reset, the check
// doing its job), which is logged at debug. FreeNow is the checked, synchronous free.
const (
	freeQueueCap     = 256 // frees per buffer; a full buffer is applied at once
	freeErrorsKept   = 64  // FreeErrors keeps the most recent failures
	freeErrorsLogged = 8   // logged one by one; then at 16, 32, 64, ... failures
)

// freeBuf is one buffer of queued frees in C memory.
type freeBuf struct {
	mem      *C.shim_free_item
	items    []C.shim_free_item // views of mem
	statuses []C.zarena_status
	n        int
}

func newFreeBuf() *freeBuf {
	mem := C.shim_queue_alloc(freeQueueCap)
	if mem == nil {
		return nil
	}
	return &freeBuf{
		mem:      mem,
		items:    unsafe.Slice(mem, freeQueueCap),
		statuses: unsafe.Slice(C.shim_queue_statuses(mem, freeQueueCap), freeQueueCap),
	}
}

// cargs are the queue arguments every arena wrapper of shim.h takes: NULL, 0 for none.
func (b *freeBuf) cargs() (*C.shim_free_item, C.size_t, *C.zarena_status) {
	if b == nil || b.n == 0 {
		return nil, 0, nil
	}
	return b.mem, C.size_t(b.n), &b.statuses[0]
}

// freeQueue is an arena's queue and its handle: the handle is read under the queue's
// lock, so a Free that fills the buffer can never cross after Close destroyed it.
type freeQueue struct {
	mu        sync.Mutex
	cond      sync.Cond // signalled when inflight drops to 0 or exclusive to 0
	h         *C.zarena // nil once Close took it
	cur       *freeBuf  // frees queued, in call order; nil when C memory ran out
	spare     []*freeBuf
	all       []*freeBuf // every buffer, released at close
	inflight  int        // batches taken and not applied yet
	exclusive int        // whole-arena calls waiting for inflight to reach 0

	errMu       sync.Mutex
	errs        []*FreeError // ring of the most recent failures
	errNext     int
	failed      atomic.Uint64
	queued      uint64 // frees queued (not counting FreeNow); under mu
	batches     uint64 // crossings that applied at least one queued free; under mu
	arenaName   string
	logFailures bool
}

func (q *freeQueue) init(h *C.zarena, name string) {
	q.cond.L = &q.mu
	q.h = h
	q.arenaName = name
	q.logFailures = true
	for i := 0; i < 2; i++ {
		if b := newFreeBuf(); b != nil {
			q.all = append(q.all, b)
			q.spare = append(q.spare, b)
		}
	}
	q.cur = q.popSpareLocked()
}

// popSpareLocked returns an empty buffer, making one when none is spare (nil when C
// memory ran out: Free then crosses at once).
func (q *freeQueue) popSpareLocked() *freeBuf {
	if n := len(q.spare); n > 0 {
		b := q.spare[n-1]
		q.spare = q.spare[:n-1]
		return b
	}
	b := newFreeBuf()
	if b != nil {
		q.all = append(q.all, b)
	}
	return b
}

// push queues one free. It returns a full buffer the caller must apply (with its
// handle), or, when there is no buffer at all, sync true: the caller frees at once.
func (q *freeQueue) push(p DevicePtr, epoch uint64) (full *freeBuf, h *C.zarena, sync bool, err error) {
	q.mu.Lock()
	if q.h == nil {
		q.mu.Unlock()
		return nil, nil, false, errClosed("Free")
	}
	if q.cur == nil {
		if q.cur = q.popSpareLocked(); q.cur == nil {
			h = q.h
			q.mu.Unlock()
			return nil, h, true, nil
		}
	}
	b := q.cur
	b.items[b.n] = C.shim_free_item{ptr: C.uintptr_t(p), epoch: C.uint64_t(epoch)}
	b.n++
	q.queued++
	if b.n < freeQueueCap {
		q.mu.Unlock()
		return nil, nil, false, nil
	}
	// Taken at once, also while a whole-arena call waits (it then waits for this batch
	// too): a full buffer must not stay current.
	b, h = q.takeLocked()
	q.mu.Unlock()
	return b, h, false, nil
}

// takeLocked hands the current buffer to the caller's crossing.
func (q *freeQueue) takeLocked() (*freeBuf, *C.zarena) {
	b := q.cur
	q.cur = q.popSpareLocked()
	q.inflight++
	return b, q.h
}

// take is the allocation's: the handle and the queued frees to apply first (nil when
// none are queued: then nothing is to be released).
func (q *freeQueue) take(op string) (*freeBuf, *C.zarena, error) {
	q.mu.Lock()
	for {
		if q.h == nil {
			q.mu.Unlock()
			return nil, nil, errClosed(op)
		}
		if q.cur == nil || q.cur.n == 0 {
			h := q.h
			q.mu.Unlock()
			return nil, h, nil
		}
		if q.exclusive == 0 {
			break
		}
		q.cond.Wait()
	}
	b, h := q.takeLocked()
	q.mu.Unlock()
	return b, h, nil
}

// takeExclusive is a whole-arena call's: it waits until the batches other goroutines
// took were applied, then takes the queue (possibly empty). The caller must call
// release with the buffer, also a nil one. closing: the handle is taken away for good.
func (q *freeQueue) takeExclusive(op string, closing bool) (*freeBuf, *C.zarena, error) {
	q.mu.Lock()
	if q.h == nil {
		q.mu.Unlock()
		return nil, nil, errClosed(op)
	}
	q.exclusive++
	for q.inflight > 0 {
		q.cond.Wait()
	}
	q.exclusive--
	if q.exclusive == 0 {
		q.cond.Broadcast() // allocations waiting to take a batch
	}
	h := q.h
	var b *freeBuf
	if q.cur != nil && q.cur.n > 0 {
		b = q.cur
		q.cur = q.popSpareLocked()
	}
	q.inflight++
	if closing {
		q.h = nil
	}
	q.mu.Unlock()
	return b, h, nil
}

// release returns a buffer after its crossing, recording the failures of its frees
// (qfailed of them) first.
func (q *freeQueue) release(b *freeBuf, qfailed C.uint32_t) {
	if b != nil && qfailed > 0 {
		q.recordFailures(b)
	}
	q.mu.Lock()
	if b != nil {
		if b.n > 0 {
			q.batches++
		}
		b.n = 0
		q.spare = append(q.spare, b)
	}
	q.inflight--
	if q.inflight == 0 && q.exclusive > 0 {
		q.cond.Broadcast()
	}
	q.mu.Unlock()
}

// counts returns the frees queued and the batches applied so far (tests).
func (q *freeQueue) counts() (queued, batches uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.queued, q.batches
}

// freeBuffers gives the C memory back (Close, after the destroy: nothing is in flight).
func (q *freeQueue) freeBuffers() {
	q.mu.Lock()
	all := q.all
	q.all, q.spare, q.cur = nil, nil, nil
	q.mu.Unlock()
	for _, b := range all {
		C.shim_queue_free(b.mem)
	}
}

func (q *freeQueue) recordFailures(b *freeBuf) {
	for i := 0; i < b.n; i++ {
		st := Status(b.statuses[i])
		if st == StatusOK {
			continue
		}
		fe := &FreeError{Ptr: DevicePtr(b.items[i].ptr), Epoch: uint64(b.items[i].epoch), Status: st}
		n := q.failed.Add(1)
		q.errMu.Lock()
		if len(q.errs) < freeErrorsKept {
			q.errs = append(q.errs, fe)
		} else {
			q.errs[q.errNext] = fe
			q.errNext = (q.errNext + 1) % freeErrorsKept
		}
		q.errMu.Unlock()
		if q.logFailures && (n <= freeErrorsLogged || bits.OnesCount64(n) == 1) {
			// A stale epoch-checked free is the check doing its job (a finalizer that ran
			// after the reset): debug. The others are bugs in the caller: warn.
			level := LevelWarn
			if st == StatusStale && fe.Epoch != AnyEpoch {
				level = LevelDebug
			}
			emitGo(Record{
				Level: level,
				Event: "go.free_failed",
				Message: fmt.Sprintf("%v (%d queued frees of this arena failed so far; "+
					"Arena.FreeErrors lists the latest, FreeNow reports at once)", fe, n),
				Arena: q.arenaName,
			})
		}
	}
}

// drainErrors returns the kept failures, oldest first, and forgets them.
func (q *freeQueue) drainErrors() []error {
	q.errMu.Lock()
	defer q.errMu.Unlock()
	out := make([]error, 0, len(q.errs))
	for i := range q.errs {
		out = append(out, q.errs[(q.errNext+i)%len(q.errs)])
	}
	q.errs, q.errNext = nil, 0
	return out
}
