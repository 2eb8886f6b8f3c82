package zarena

/*
#include "shim.h"
*/
import "C"

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

// Step plans without crossings (issue 23; docs/PLANS.md, "Go bindings").
//
// Under a step plan (on by default; FlagNoPlan, ZARENA_PLAN=0: off) the library serves a
// repeating step's allocations from precomputed offsets in one zone of the region, and
// publishes the plan and its state in one block of C memory (zarena/zarena_plan.h: the
// view and the protocol).
// The binding serves planned requests itself from that memory, with sync/atomic on the
// library's words and no cgo call: Alloc, AllocBlock and AllocTagged take the plan's lock,
// check the request against the plan and the check list of the block they hand out, and
// mark it live; Free and FreeBlock of a planned block mark it freed with one
// compare-and-swap. Everything else crosses as without a plan: a request the plan does not
// expect (the library learns the step again), an allocation the plan leaves to the library,
// AllocBatch, FreeNow, pins, and any free that is not the plain case (double, stale, of
// another epoch, of a pinned block): those are queued as any free. While poison is on the
// binding serves nothing itself (the library fills freed blocks).
//
// The view is fetched at the calls that end a step anyway (StepBegin, Reset, Step) and at
// SetPoison; the library changes plans only there, so between them the cached view is the
// library's. A view stays valid until the arena is destroyed: Close takes the view away,
// then waits until no goroutine is still in the planned path before it destroys the arena
// (SetPoison waits likewise, so no free the binding served runs unpoisoned after it).
//
// The wait costs the planned path no shared write where the runtime allows it
// (runtime_fast.go: Go 1.23 on amd64): a goroutine runs the path pinned to its P
// (planEnter: runtime.procPin; not preemptible, and it neither blocks nor calls C there),
// from the load of the view to its last use. The waiter stores nil, then stops the world
// once (planWait: runtime.ReadMemStats): a stop completes only when every P has reached a
// safe point, so every goroutine that loaded the old view has left the path, and every
// later one sees nil. (Counting goroutines in and out, per shard, cost two locked adds per
// call: four of the planned pair's six locked instructions.) Everywhere else
// (runtime_portable.go, or the zarena_portable build tag) the path holds a read-write gate
// for reading and planWait takes it for writing: the same guarantee, assuming nothing of
// the runtime. TestPlanCloseWhileServing closes arenas under serving goroutines, in both
// builds (scripts/go-test.sh).
//
// The library's plan_hits counts the planned allocations both sides served (the binding
// adds its own under the plan's lock, as the protocol says); the binding also counts the
// ones it served, per P (planServed), so tests and benchmarks can tell them apart.

// The protocol's constants and the planView struct are generated from the library's table
// (plan_protocol_gen.go, from src/plan/plan_protocol.h).
const (
	// planEpochMask: an epoch is compared in the low bits its stamp holds.
	planEpochMask = planWEpochMask >> planWEpochShift
	planNone      = ^uint32(0)
	// maxRequest: larger requests are the library's (zarena_alloc's limit, 2^62).
	maxRequest = uint64(1) << 62
)

// How a planned allocation went.
const (
	planLibrary   = iota // not served: the library serves it (no plan engaged, or a deviation)
	planServed           // served from the plan
	planUnplanned        // the plan leaves this allocation to the library (rule 4)
	planBusy             // the plan's lock stayed held: yield, then try again
)

// newPlanView reads v (nil: no plan). A view of another version than the one this binding
// follows, or a smaller one, gives nil: the binding then never takes the planned path.
func newPlanView(v *C.zarena_plan_view) *planView {
	if v == nil || v.version != planViewVersion ||
		uintptr(v.struct_size) < unsafe.Sizeof(*v) || v.n == 0 {
		return nil
	}
	return planViewOf(v)
}

// planLive: the instance word w is live in epoch e (handed out, not freed, and not
// reclaimed by a reset: persistent, pinned or of the current epoch).
func planLive(w, e uint64) bool {
	s := w & planWStateMask
	return (s == planWLive || s == planWDeferred) &&
		(w&(planWPersistentMask|planWPinMask) != 0 || w>>planWEpochShift == e&planEpochMask)
}

// lockPlan takes the plan's lock, or gives up after a while (false): the caller, pinned,
// must not wait longer, and yields before it tries again (the holder may be a goroutine
// waiting for this processor).
func (pl *planView) lockPlan() bool {
	for spins := 0; spins < 64; spins++ {
		if atomic.LoadUint32(pl.lock) == 0 && atomic.CompareAndSwapUint32(pl.lock, 0, 1) {
			return true
		}
	}
	return false
}

func (pl *planView) unlockPlan() { storeRel32(pl.lock, 0) }

// deviate ends the plan for the rest of the step (the plan's lock held).
func (pl *planView) deviate(reason uint64, i uint32) {
	atomic.AndUint64(pl.state, ^uint64(planSEngagedMask))
	storeRel64(pl.missReason, reason)
	storeRel64(pl.missIndex, uint64(i))
}

// alloc is the protocol's allocation for size (rounded to the alignment) and tag; on
// planServed, the block's address and epoch (its size and tag are the request's). Not a
// Block: a struct of five fields travels through memory, and its copies stalled on store
// forwarding (a tenth of the planned pair). planBusy: the lock stayed held, nothing was
// done.
func (pl *planView) alloc(size uint64, tag uint32) (p DevicePtr, epoch uint64, r int) {
	if atomic.LoadUint64(pl.state)&planSEngagedMask == 0 {
		return 0, 0, planLibrary
	}
	if !pl.lockPlan() {
		return 0, 0, planBusy
	}
	st := atomic.LoadUint64(pl.state)
	if st&planSEngagedMask == 0 {
		pl.unlockPlan()
		return 0, 0, planLibrary
	}
	i := atomic.LoadUint32(pl.cursor)
	var reason uint64
	switch {
	case i >= pl.n:
		reason = planMissExtra
	case pl.itemSize[i] != size:
		reason = planMissSize
	case pl.itemTag[i] != tag:
		reason = planMissTag
	}
	if reason != 0 {
		pl.deviate(reason, i)
		pl.unlockPlan()
		return 0, 0, planLibrary
	}
	if pl.itemPlanned[i] == 0 {
		storeRel32(pl.cursor, i+1)
		pl.unlockPlan()
		return 0, 0, planUnplanned
	}
	id := uint32(st&planSParityMask>>planSParityShift)*pl.n + i
	e := atomic.LoadUint64(pl.epoch)
	// Every instance whose bytes this one reuses must be dead, its own earlier one too.
	clear := !planLive(atomic.LoadUint64(&pl.words[id]), e)
	for k, end := pl.checkBegin[id], pl.checkBegin[id+1]; clear && k < end; k++ {
		clear = !planLive(atomic.LoadUint64(&pl.words[pl.checkList[k]]), e)
	}
	if !clear {
		pl.deviate(planMissLate, i)
		pl.unlockPlan()
		return 0, 0, planLibrary
	}
	storeRel64(&pl.born[id], e)
	storeRel64(&pl.words[id], planWLive|(e&planEpochMask)<<planWEpochShift)
	storeRel32(&pl.dlast[pl.dindex[id]], id)
	storeRel32(pl.cursor, i+1)
	storeRel64(pl.hits, *pl.hits+1) // only lock holders write it
	pl.unlockPlan()
	return DevicePtr(pl.zone + uintptr(pl.offset[id])), e, planServed
}

// inZone reports whether p lies in the plan's zone.
func (pl *planView) inZone(p DevicePtr) bool { return uint64(uintptr(p)-pl.zone) < pl.zoneBytes }

// free is the protocol's plain free of p (in the zone), checked against want (AnyEpoch:
// none): true when it freed the block; false for every other case, which the library
// decides (a free it does not own, a double or stale free, a pinned block's deferred free).
func (pl *planView) free(p DevicePtr, want uint64) bool {
	off := uint64(uintptr(p) - pl.zone)
	b := off >> pl.bucketShift
	if b+1 >= uint64(len(pl.bucket)) {
		return false
	}
	id := planNone
	for d, end := pl.bucket[b], pl.bucket[b+1]; d < end; d++ {
		if o := pl.doffset[d]; o == off {
			id = atomic.LoadUint32(&pl.dlast[d])
			break
		} else if o > off {
			break
		}
	}
	if id == planNone {
		return false
	}
	w := atomic.LoadUint64(&pl.words[id])
	for {
		if w&planWStateMask != planWLive || w&planWPinMask != 0 ||
			!planLive(w, atomic.LoadUint64(pl.epoch)) ||
			(want != AnyEpoch && atomic.LoadUint64(&pl.born[id]) != want) {
			return false
		}
		if atomic.CompareAndSwapUint64(&pl.words[id], w, w&^planWStateMask|planWFreed) {
			return true
		}
		w = atomic.LoadUint64(&pl.words[id])
	}
}

// allocPlanned serves n bytes with tag from the plan when it can: the block's address and
// epoch (Size is n rounded to the alignment, Flags BlockPlanned). planUnplanned: the
// library must serve it without asking the plan (allocCross).
func (a *Arena) allocPlanned(n uint64, tag Tag) (p DevicePtr, epoch uint64, r int) {
	return a.allocPlannedIn(&a.plan, n, tag)
}

// allocPlannedIn is allocPlanned from the view in plan: the Arena's, or a Lane's (lane.go).
func (a *Arena) allocPlannedIn(plan *atomic.Pointer[planView], n uint64, tag Tag) (p DevicePtr, epoch uint64, r int) {
	if n-1 >= maxRequest { // 0 and sizes no arena can describe: never planned (as in C)
		return 0, 0, planLibrary
	}
	size := (n + a.align - 1) &^ (a.align - 1)
	for {
		pid := a.planEnter() // the view is used only until planLeave (see the top of this file)
		pl := plan.Load()
		if pl == nil {
			a.planLeave()
			return 0, 0, planLibrary
		}
		p, epoch, r = pl.alloc(size, uint32(tag))
		if r == planServed {
			a.served.add(pid)
		}
		a.planLeave()
		if r != planBusy {
			return p, epoch, r
		}
		runtime.Gosched()
	}
}

// freePlanned frees p from the plan when it is the plain case (true).
func (a *Arena) freePlanned(p DevicePtr, epoch uint64) bool {
	return a.freePlannedIn(&a.plan, p, epoch)
}

// freePlannedIn is freePlanned with the view in plan: the Arena's, or a Lane's.
func (a *Arena) freePlannedIn(plan *atomic.Pointer[planView], p DevicePtr, epoch uint64) bool {
	a.planEnter()
	pl := plan.Load()
	done := pl != nil && pl.inZone(p) && pl.free(p, epoch)
	a.planLeave()
	return done
}

// setPlanLocked caches the library's plan view v (every shard locked): none while poison is
// on (the library fills freed blocks; the view is dropped with the wait). A planView is
// built once per plan. A view replaced or dropped without the wait stays usable by a
// goroutine that still holds it (the library keeps every view until destroy).
func (a *Arena) setPlanLocked(v *C.zarena_plan_view) {
	if a.poison {
		v = nil
	}
	if cur := a.plan.Load(); cur == nil || cur.view != v {
		if pl := newPlanView(v); pl != nil {
			if a.served.slots == nil {
				a.served.init()
			}
			a.plan.Store(pl)
			a.planUnwaited.Store(true)
		} else if cur != nil || a.poison {
			a.dropPlanLocked(a.poison)
		}
	}
	a.setLaneViewsLocked() // a boundary of the arena is every Lane's (lane.go)
}

// dropPlanLocked takes the view away (every shard locked); with wait, it returns once no
// goroutine is still in the planned path: after it, the arena may be destroyed, and no free
// the binding served can still be running unpoisoned. It waits whenever a view was
// published since the last wait: one dropped without a wait may still be in a goroutine's
// hands.
func (a *Arena) dropPlanLocked(wait bool) {
	a.plan.Store(nil)
	for _, c := range a.cLanes { // the Lanes' views go with it (lane.go)
		c.plan.Store(nil)
	}
	if wait && a.planUnwaited.Load() {
		a.planWait() // see the top of this file
		a.planUnwaited.Store(false)
	}
}

// servedCounts counts the allocations the binding served from plans, one counter per P on
// a cache line of its own, in C memory: the P that serves one is pinned, so its counter has
// one writer at a time, which a plain add keeps exact (Go memory would make the race
// detector see the different goroutines that take turns on a P as a race). A P beyond the
// counters made at the first plan (GOMAXPROCS was raised since), and every goroutine of the
// portable build (which pins nothing: planEnter returns noP), adds atomically to the last
// counter, kept for them.
type servedCounts struct {
	// slots and n are set once, before the first view is published (the planned path reads
	// them after loading the view); never written again.
	slots []uint64 // counter k at slots[k*servedStride]; nil before the first plan
	n     int      // counters for P 0..n-1, then the shared one
	inC   bool     // slots is C memory (calloc)
	// Every shard locked: set by Close, once the memory is given back.
	released bool
	final    uint64 // the sum then
}

const servedStride = 16 // 128 bytes: the adjacent-line prefetcher pairs lines

func (c *servedCounts) init() {
	c.n = runtime.GOMAXPROCS(0)
	words := (c.n + 1) * servedStride
	if mem := C.calloc(C.size_t(words), 8); mem != nil {
		c.slots, c.inC = unsafe.Slice((*uint64)(mem), words), true
	} else { // every P adds atomically to the one counter, in Go memory: still exact
		c.slots, c.n = make([]uint64, servedStride), 0
	}
}

// add counts one allocation served on P pid (pinned), or on the shared counter.
func (c *servedCounts) add(pid int) {
	if pid < c.n {
		c.slots[pid*servedStride]++
	} else if c.slots != nil {
		atomic.AddUint64(&c.slots[c.n*servedStride], 1)
	}
}

// release sums the counters into final and frees them (every shard locked, after the wait:
// no goroutine is in the planned path).
func (c *servedCounts) release() {
	if c.released {
		return
	}
	c.final = c.sum()
	if c.inC {
		C.free(unsafe.Pointer(&c.slots[0]))
	}
	c.released = true
}

// sum adds the counters up (every shard locked).
func (c *servedCounts) sum() uint64 {
	if c.released {
		return c.final
	}
	var n uint64
	for k := 0; k*servedStride < len(c.slots); k++ {
		n += atomic.LoadUint64(&c.slots[k*servedStride])
	}
	return n
}

// planServed is how many allocations the binding served from plans (exact once the
// goroutines that served them are synchronised with the caller).
func (a *Arena) planServed() uint64 {
	a.lockShards()
	defer a.unlockShards()
	return a.served.sum()
}
