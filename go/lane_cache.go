package zarena

/*
#include "shim.h"
*/
import "C"

import (
	"math/bits"
	"sync/atomic"
	"unsafe"
)

// Kept blocks: a Lane's plain Alloc+Free pair without a crossing (issue 32, part 3).
//
// A cgo call costs about what a pure-Go arena's whole alloc+free pair does, so a Lane keeps
// the blocks its caller frees instead of giving them back: live in the library (which sees
// one long-lived block), kept by the shard that handed them out, by rounded size, and
// handed out again to that shard's next request of the size (with no tag) with no cgo
// call. The library is told what happened in between (zarena/zarena_kept.h): the requests
// served so (its requests, hits and reuses) and the frees refused (invalid or stale), in
// the next crossing of the shard; and every call that looks at the arena as a whole
// (Stats, Reset, StepBegin, LiveBlocks, Pin, FreeNow, MarkStepBoundary, FreeErrors, Close,
// ...) first gives every kept block back, in the crossing that applies the queued frees.
// So the library's stats are exact whenever it is asked through the binding; in between,
// its counters lag by the kept requests since each shard's last crossing, and its used
// bytes count kept blocks as live.
//
// Misuse is caught at the call. Every block a Lane's crossing hands out (in the region, no
// tag, up to keptMaxBlock) is tracked in the arena's index (kept_index.go) with its state
// (out, kept, gone) and owner shard. A free of a tracked block, from any goroutine, Lane or
// not, decides under the owner's lock: a kept block is a double free (ErrDoubleFree), a
// block named with another epoch is stale (ErrStale: the index holds this epoch's blocks
// only); either is returned at the call as a *FreeError, counted by the library and kept
// for FreeErrors, as a queued free that failed would be. A free of any other pointer is
// queued for the library as without Lanes, which answers when it is applied. A free that
// is not a Lane's (Arena.Free, FreeNow) marks a tracked block gone and leaves it to the
// library.
//
// Bounds: a shard keeps at most keptMaxBlocks blocks and keptShardBytes bytes; larger
// blocks are never kept; a free beyond that goes to the library. Blocks above 512 KiB
// (ZARENA_KEPT_MAX_BLOCK_BYTES, zarena_kept.h) are the library's to share: it gives every
// freed block that large to its central side at once (docs/CONCURRENCY.md "Big blocks are
// shared"), where any thread can take it and it merges with the free blocks around it;
// kept by one shard, it would be memory no other goroutine could use. Memory the region could
// not give an allocation may sit in kept blocks: an allocation refused for lack of memory
// while blocks are kept gives every kept block back and tries again once.
//
// Step plans first. While the library's step plans follow every request (they are on by
// default: the learner records a step, or a plan serves one) nothing is kept: a kept block
// hides requests from the learner, which would learn a step the program does not make
// (the requests that happened to cross), and from an engaged plan, which would be
// abandoned at its first unexpected request, so learning and planning would take turns
// for ever. The library says when keeping is allowed (zarena_kept_report_add, asked with an
// empty report): with plans off (FlagNoPlan, ZARENA_PLAN=0), and with plans on while they
// learn nothing and serve nothing: a program that marks no steps (the learner gives up
// after 64k allocations before the first boundary), a step too long to learn (1M
// allocations), learning paused after many steps that do not repeat, or stopped at the
// plans' budget. The answer changes at step boundaries (StepBegin, Reset, Step) and floor
// changes (SetFloor, MarkStepBoundary), where the binding asks again (keepNow) with every
// kept block already given back, and when the learner gives a step up, which the binding
// finds by asking again every keptAskEvery crossings of a shard while refused. A tracked
// block freed while keeping is refused goes to the library.
//
// What is never kept: with a trace written (the library must see every request: it
// refuses, zarena_kept_report_add), with FlagDiagnoseSync, while poison is on (a freed
// block must be filled at once), tagged blocks, overflow blocks, blocks of AllocBatch. Pins
// forget the whole index (a pin may name any address in a block), FreeNow the block it
// frees: their frees go to the library.
const (
	keptMaxBlocks  = 128                           // per shard
	keptShardBytes = 8 << 20                       // per shard, at most (less for small arenas: initKept)
	keptClassSlots = 256                           // distinct sizes a shard keeps at once (a power of two)
	keptIndexMin   = 1024                          // the index's first size (slots)
	keptMaxBlock   = C.ZARENA_KEPT_MAX_BLOCK_BYTES // the largest block kept (less for small arenas; Bounds above)
	keptAskEvery   = 1024                          // crossings of a shard between two questions while refused
)

// keptIndexMax is the index's largest size (slots; 32 MiB): about a million live blocks
// tracked; beyond, blocks stay untracked until the next reset. A variable for tests.
var keptIndexMax = 1 << 21

// laneCache is the blocks one shard keeps: a pool of at most keptMaxBlocks, on one stack
// per class (rounded size over the alignment), the stacks found by class in a small
// open-addressed table, cleared whenever the shard gives its blocks back.
type laneCache struct {
	free    int16  // the pool's unused entries, linked through next; -1: none
	hot     int    // the class slot used last (a loop of one size finds it at once)
	nclass  int    // classes in use
	count   int    // blocks kept
	bytes   uint64 // their bytes
	classes [keptClassSlots]keptClass
	pool    [keptMaxBlocks]keptBlock
}

type keptBlock struct {
	ptr  uintptr
	slot uint32 // its slot in the index
	next int16  // the next block of its class (or of the free list); -1: none
}

type keptClass struct {
	cls  uint64 // 0: unused
	head int16  // -1: no block kept
}

func newLaneCache() *laneCache {
	c := &laneCache{}
	c.reset()
	return c
}

// reset empties the cache (its blocks were given back).
func (c *laneCache) reset() {
	for i := range c.pool {
		c.pool[i].next = int16(i + 1)
	}
	c.pool[keptMaxBlocks-1].next = -1
	c.free = 0
	c.classes = [keptClassSlots]keptClass{}
	c.nclass, c.hot, c.count, c.bytes = 0, 0, 0, 0
}

// class finds cls's stack (add: make one when none; nil when the table is full).
func (c *laneCache) class(cls uint64, add bool) *keptClass {
	if k := &c.classes[c.hot]; k.cls == cls {
		return k
	}
	for i := int((cls * 0x9E3779B97F4A7C15) >> 56); ; i = (i + 1) & (keptClassSlots - 1) {
		k := &c.classes[i]
		if k.cls == cls {
			c.hot = i
			return k
		}
		if k.cls == 0 {
			if !add || c.nclass >= keptClassSlots*3/4 {
				return nil
			}
			c.nclass++
			k.cls, k.head = cls, -1
			c.hot = i
			return k
		}
	}
}

// push keeps the block at ptr (index slot slot) on k's stack (room checked).
func (c *laneCache) push(k *keptClass, bytes uint64, ptr uintptr, slot uintptr) {
	j := c.free
	c.free = c.pool[j].next
	c.pool[j] = keptBlock{ptr: ptr, slot: uint32(slot), next: k.head}
	k.head = j
	c.count++
	c.bytes += bytes
}

// each calls f for every kept block.
func (c *laneCache) each(f func(b *keptBlock)) {
	for i := range c.classes {
		for j := c.classes[i].head; c.classes[i].cls != 0 && j >= 0; j = c.pool[j].next {
			f(&c.pool[j])
		}
	}
}

// initKept decides whether Lanes may ever keep blocks in this arena, asks the library
// whether they may now, and sizes the budgets to the region (at New).
func (a *Arena) initKept(diagnoseSync bool) {
	a.kept.shift = uint(bits.TrailingZeros64(a.align))
	a.keptShardBytes = min(keptShardBytes, a.size/uint64(8*len(a.shards)))
	a.keptMaxBlock = min(keptMaxBlock, a.keptShardBytes)
	a.keepOK = !diagnoseSync && a.keptShardBytes >= a.align &&
		len(a.shards) <= 1<<keptOwnerBits && C.shim_kept_available() != 0
	a.keepNow.Store(a.keepOK && C.shim_kept_allowed(a.h) != 0)
}

// keptAsk is the ask argument of the boundary shims (shim_reset, shim_step_begin): 1 when
// the answer matters (Lanes may keep here).
func (a *Arena) keptAsk() C.int {
	if a.keepOK {
		return 1
	}
	return 0
}

// keptAnswerLocked takes the library's answer after a boundary (every shard locked, every
// kept block given back by lockAll).
func (a *Arena) keptAnswerLocked(allowed C.int) {
	if a.keepOK {
		a.keepNow.Store(allowed != 0)
	}
}

// keptAskLocked asks the library again (every shard locked: a floor change).
func (a *Arena) keptAskLocked(h C.uintptr_t) {
	if a.keepOK {
		a.keepNow.Store(C.shim_kept_allowed(h) != 0)
	}
}

// keptCrossed counts a crossing of s (s locked, the arena open): while the library refuses
// keeping and Lanes exist, every keptAskEvery-th crossing of a shard asks again (the
// learner may have given its step up). Turning keeping on needs no other shard's lock
// (until a shard sees it, it simply keeps nothing) but shard 0's: a planned steady state's
// boundary (lockQuiet) holds only that one and counts on keeping staying off meanwhile.
// Shard 0 is tried, never waited for (the locks' order: shard 0 first); taken, the library
// is asked, else the next keptAskEvery-th crossing asks.
func (a *Arena) keptCrossed(s *shard) {
	if !a.keepOK || a.keepNow.Load() || a.kept.tab.Load() == nil {
		return
	}
	if s.crossings++; s.crossings%keptAskEvery != 0 {
		return
	}
	s0 := &a.shards[0]
	if s != s0 && !s0.mu.TryLock() {
		return
	}
	if C.shim_kept_allowed(a.h) != 0 {
		a.keepNow.Store(true)
	}
	if s != s0 {
		s0.mu.Unlock()
	}
}

// keepable: a block of aligned bytes at p (just handed out, no tag) may be tracked.
func (a *Arena) keepable(p uintptr, aligned uint64) bool {
	return !a.poison && aligned <= a.keptMaxBlock && p-a.base < uintptr(a.size)
}

// keptReady makes s ready to keep blocks (s locked): its cache, and the buffer whose report
// the library reads; false when C memory for the buffer ran out.
func (a *Arena) keptReady(s *shard) bool {
	if s.cache == nil {
		if s.buf == 0 && !a.newShardBuffer(s) {
			return false
		}
		s.cache = newLaneCache()
	}
	return true
}

// allocKept is a Lane's Alloc: a block the shard keeps when one of the size is there, else
// the crossing (under the same lock), whose block is then tracked.
func (a *Arena) allocKept(frame uintptr, n uint64) (DevicePtr, error) {
	p, _, s := a.popKept(frame, n)
	if p != 0 {
		return p, nil
	}
	b, err := a.allocKeptSlow(s, frame, n, false, "Alloc")
	return b.Ptr, err
}

// allocBlockKept is a Lane's AllocBlock (and AllocTagged with no tag).
func (a *Arena) allocBlockKept(frame uintptr, n uint64, op string) (Block, error) {
	p, epoch, s := a.popKept(frame, n)
	if p != 0 {
		return Block{Ptr: p, Epoch: epoch, Size: (n + a.align - 1) &^ (a.align - 1),
			Flags: BlockReused}, nil
	}
	return a.allocKeptSlow(s, frame, n, true, op)
}

// popKept hands out a block of n bytes that the caller's shard keeps, with the epoch (read
// under the shard's lock: no reset meanwhile); else it returns 0 and the caller's shard,
// locked (nil: none locked, n is not for keeping). Small, and apart from the crossing's code,
// so that the common case sets up no large frame.
func (a *Arena) popKept(frame uintptr, n uint64) (DevicePtr, uint64, *shard) {
	if !a.keepNow.Load() || n-1 >= maxRequest {
		return 0, 0, nil
	}
	aligned := (n + a.align - 1) &^ (a.align - 1)
	i := a.home(frame)
	s := &a.shards[i]
	if !s.mu.TryLock() {
		s = a.lockBusy(i)
	}
	if !a.keepNow.Load() { // refused since the first look (a boundary): the Arena's path
		s.mu.Unlock()
		return 0, 0, nil
	}
	c := s.cache
	if c == nil || a.poison || aligned > a.keptMaxBlock {
		return 0, 0, s
	}
	cls := aligned >> (a.kept.shift & 63)
	k := &c.classes[c.hot]
	if k.cls != cls {
		if k = c.class(cls, false); k == nil {
			return 0, 0, s
		}
	}
	j := k.head
	if j < 0 {
		return 0, 0, s
	}
	b := &c.pool[j]
	k.head, b.next, c.free = b.next, c.free, j
	c.count--
	c.bytes -= aligned
	w := &a.kept.tab.Load().slots[b.slot].word // owned by s, which stays its owner
	storeOwned(w, atomic.LoadUint64(w)&^keptStateMask|keptOut)
	s.rep.allocs++
	s.worked()
	s.keptServed++
	if C.uint64_t(n) > s.rep.max_request {
		s.rep.max_request = C.uint64_t(n)
	}
	p, epoch := b.ptr, a.epoch.Load()
	s.mu.Unlock()
	return DevicePtr(p), epoch, nil
}

// allocKeptSlow is a Lane's crossing (block: AllocBlock's, with the whole block), on s,
// locked by popKept (nil: the request is not for keeping; the Arena's path serves it).
func (a *Arena) allocKeptSlow(s *shard, frame uintptr, n uint64, block bool, op string) (Block, error) {
	if s == nil {
		if block {
			return a.allocBlock(frame, n, 0, op)
		}
		p, err := a.alloc(frame, n)
		return Block{Ptr: p}, err
	}
	aligned := (n + a.align - 1) &^ (a.align - 1)
	if a.h == 0 {
		s.mu.Unlock()
		return Block{}, errClosed(op)
	}
	var b Block
	var status C.zarena_status
	var queuedFailed C.uint32_t
	var msg *C.char
	if block {
		r := C.shim_alloc_block(a.h, s.buf, C.size_t(s.n), C.uint64_t(n), 0, 0)
		status, queuedFailed, msg = r.status, r.queued_failed, r.err
		b = Block{Ptr: DevicePtr(r.ptr), Epoch: uint64(r.epoch), Size: uint64(r.size),
			Flags: BlockFlags(r.flags), Tag: Tag(r.tag)}
	} else {
		r := C.shim_alloc(a.h, s.buf, C.size_t(s.n), C.uint64_t(n))
		status, queuedFailed, msg = r.status, r.queued_failed, r.err
		b = Block{Ptr: DevicePtr(r.ptr)}
	}
	if s.n > 0 {
		a.applied(s, queuedFailed)
	}
	if status == C.ZARENA_OK && a.keepable(uintptr(b.Ptr), aligned) && a.keptReady(s) {
		a.kept.insert(uintptr(b.Ptr), s.idx, aligned>>a.kept.shift)
	}
	s.mu.Unlock()
	if status != C.ZARENA_OK || queuedFailed != 0 {
		err := a.allocFailed(status, msg)
		if err != nil && status == C.ZARENA_E_OUT_OF_MEMORY && a.giveBackKept() {
			// Once more, with the kept blocks back in the region.
			if block {
				return a.allocBlock(frame, n, 0, op)
			}
			p, err := a.alloc(frame, n)
			return Block{Ptr: p}, err
		}
		if err != nil {
			return Block{}, err
		}
	}
	if a.kept.wantGrow.Load() {
		a.growKept()
	}
	if block {
		a.overflowed(b.Flags)
	}
	return b, nil
}

// freeKept is a Lane's Free and FreeBlock: the plain case (a tracked block, named with this
// epoch or none, room to keep it) in a small function; everything else through queueFree.
func (a *Arena) freeKept(frame uintptr, p DevicePtr, epoch uint64) error {
	switch a.pushKept(p, epoch) {
	case keptDone:
		return nil
	case keptToLibrary:
		return a.queueFreeUntracked(frame, p, epoch)
	}
	return a.queueFree(frame, p, epoch, true)
}

// pushKept's outcomes.
const (
	keptElse      = iota // not the plain case: queueFree decides
	keptDone             // kept
	keptToLibrary        // no room: marked gone, the library's (queue it)
)

func (a *Arena) pushKept(p DevicePtr, epoch uint64) int {
	x := &a.kept
	t := x.tab.Load() // nil unless a.keepOK
	if t == nil || !a.keepNow.Load() {
		return keptElse
	}
	// The block's slot: the first probe (the common case), else find.
	slot := t.home(uintptr(p))
	if uintptr(atomic.LoadUint64(&t.slots[slot].key)) != uintptr(p) {
		var ok bool
		if slot, _, ok = t.find(uintptr(p)); !ok {
			return keptElse
		}
	}
	w := &t.slots[slot].word
	o := keptOwner(atomic.LoadUint64(w))
	s := &a.shards[o]
	s.mu.Lock()
	// Under the owner's lock: if the table is still the index's (a slot's key never changes
	// within a table) and o still owns the block, no one else writes its word.
	v := atomic.LoadUint64(w)
	c := s.cache
	if c == nil || x.tab.Load() != t || v&keptStateMask != keptOut || keptOwner(v) != o ||
		a.poison || !a.keepNow.Load() || (epoch != AnyEpoch && epoch != a.epoch.Load()) {
		s.mu.Unlock()
		return keptElse
	}
	cls := v >> keptClassShift
	bytes := cls << (x.shift & 63)
	k := &c.classes[c.hot]
	if k.cls != cls {
		k = c.class(cls, true)
	}
	if k == nil || c.free < 0 || c.bytes+bytes > a.keptShardBytes { // no room: the library's
		storeOwned(w, keptGone)
		s.mu.Unlock()
		return keptToLibrary
	}
	storeOwned(w, v&^keptStateMask|keptHeld)
	c.push(k, bytes, uintptr(p), slot)
	s.worked()
	s.mu.Unlock()
	return keptDone
}

// freeTracked decides a free of p when p is a tracked block, under its owner's lock (no
// shard lock held by the caller; lane: a Lane's free, which may keep it). done false: p is
// not tracked (or no longer: it was just marked gone), and the free goes on to the queue.
func (a *Arena) freeTracked(p DevicePtr, epoch uint64, lane bool) (done bool, err error) {
	for {
		t, slot, w0, ok := a.kept.find(uintptr(p))
		if !ok {
			return false, nil
		}
		o := keptOwner(w0)
		s := &a.shards[o]
		s.mu.Lock()
		w := &t.slots[slot].word
		v := atomic.LoadUint64(w) // under the owner's lock
		if a.kept.tab.Load() != t || keptOwner(v) != o || atomic.LoadUint64(&t.slots[slot].key) != uint64(p) {
			s.mu.Unlock() // rebuilt, or handed out anew by another shard, meanwhile: again
			continue
		}
		state := v & keptStateMask
		if state == keptHeld || state == keptOut {
			// As the library answers: a free naming another epoch than the block's is stale,
			// whatever the block's state; then a kept block's is a double free.
			refused := StatusOK
			if epoch != AnyEpoch && epoch != a.epoch.Load() {
				refused = StatusStale
			} else if state == keptHeld {
				refused = StatusDoubleFree
			}
			if refused != StatusOK {
				err = a.keptRefused(s, p, epoch, refused)
				s.mu.Unlock()
				a.errs.logPending(a.name, a.id)
				return true, err
			}
		}
		switch state {
		case keptOut:
			cls := v >> keptClassShift
			bytes := cls << (a.kept.shift & 63)
			if lane && a.keepNow.Load() && !a.poison && a.keptReady(s) && s.cache.free >= 0 &&
				s.cache.bytes+bytes <= a.keptShardBytes {
				if k := s.cache.class(cls, true); k != nil {
					storeOwned(w, v&^keptStateMask|keptHeld)
					s.cache.push(k, bytes, uintptr(p), slot)
					s.worked()
					s.mu.Unlock()
					return true, nil
				}
			}
			storeOwned(w, keptGone) // to the library: the caller queues it
			s.mu.Unlock()
			return false, nil
		default:
			s.mu.Unlock()
			return false, nil
		}
	}
}

// keptRefused records a free the binding refused (s locked): counted for the library in the
// shard's report, kept for FreeErrors, logged (logPending) as a failed queued free would be,
// and returned.
func (a *Arena) keptRefused(s *shard, p DevicePtr, epoch uint64, st Status) error {
	if s.rep != nil || a.newShardBuffer(s) {
		if st == StatusStale {
			s.rep.stale_frees++
		} else {
			s.rep.invalid_frees++
		}
		s.worked()
	}
	fe := &FreeError{Ptr: p, Epoch: epoch, Status: st}
	a.errs.record(fe)
	return fe
}

// giveBackKeptLocked moves every kept block into its shard's queue of frees, which the
// caller applies (every shard locked, the arena open).
func (a *Arena) giveBackKeptLocked() {
	for i := range a.shards {
		if s := &a.shards[i]; s.cache != nil && s.cache.count != 0 {
			a.giveBackShardKeptLocked(s)
		}
	}
}

// giveBackShardKeptLocked is giveBackKeptLocked for shard s alone (every shard locked; its
// cache holds blocks).
func (a *Arena) giveBackShardKeptLocked(s *shard) {
	c := s.cache
	if s.n+c.count > freeQueueCap {
		a.applyShard(s)
	}
	t := a.kept.tab.Load()
	c.each(func(b *keptBlock) {
		storeOwned(&t.slots[b.slot].word, keptGone)
		s.items[s.n] = C.shim_free_item{ptr: C.uintptr_t(b.ptr), epoch: C.uint64_t(AnyEpoch)}
		s.n++
	})
	s.worked()
	c.reset()
}

// giveBackKept gives every kept block back to the library now; false when none was kept.
func (a *Arena) giveBackKept() bool {
	a.lockShards()
	kept := false
	for i := range a.shards {
		if c := a.shards[i].cache; c != nil && c.count > 0 {
			kept = true
		}
	}
	a.unlockShards()
	if !kept {
		return false
	}
	if _, err := a.lockAll("Alloc"); err == nil { // lockAll gives them back
		a.unlockAll()
	}
	return true
}

// growKept makes the index, or rebuilds it larger and without tombstones, when an insert
// asked for it (or a.Lane, for the first).
func (a *Arena) growKept() {
	a.lockShards()
	defer a.unlockShards()
	if a.h == 0 || !a.kept.wantGrow.Load() {
		return
	}
	a.kept.wantGrow.Store(false)
	if !a.kept.rebuildLocked() {
		return
	}
	t := a.kept.tab.Load()
	for i := range a.shards { // the kept blocks' slots moved
		if c := a.shards[i].cache; c != nil {
			c.each(func(b *keptBlock) {
				slot, _, _ := t.find(b.ptr)
				b.slot = uint32(slot)
			})
		}
	}
}

// keptCounts is how many blocks the shards keep, their bytes, and how many allocations they
// served from kept blocks, ever (tests and benchmarks).
func (a *Arena) keptCounts() (blocks int, bytes, served uint64) {
	a.lockShards()
	defer a.unlockShards()
	for i := range a.shards {
		s := &a.shards[i]
		served += s.keptServed
		if c := s.cache; c != nil {
			blocks += c.count
			bytes += c.bytes
		}
	}
	return blocks, bytes, served
}

// newShardBuffer gives s its buffer of queued frees and its report (s locked): false when C
// memory ran out.
func (a *Arena) newShardBuffer(s *shard) bool {
	mem := (*C.shim_free_item)(a.newQueueBuffer())
	if mem == nil {
		return false
	}
	s.buf = C.uintptr_t(uintptr(unsafe.Pointer(mem)))
	s.items = unsafe.Slice(mem, freeQueueCap)
	s.statuses = unsafe.Slice((*C.zarena_status)(unsafe.Add(unsafe.Pointer(mem),
		freeQueueCap*int(unsafe.Sizeof(*mem)))), freeQueueCap)
	s.rep = C.shim_queue_report(s.buf)
	if !a.poison {
		s.limit = freeQueueCap
	}
	return true
}
