//go:build cgo

package zarena

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"sync/atomic"
)

// Lane is one goroutine's own way into an arena: one stream, one worker, one Lane. The Alloc
// and Free of a Lane use a shard of the free queue of their own (freequeue.go), chosen when
// the Lane is made, instead of the shard an address in the caller's stack names. Lanes made
// one after another get different shards until the shards run out (there are at least
// twice GOMAXPROCS at New), so worker goroutines that each hold a Lane never find their
// shard held by another, where goroutines whose stacks happen to name the same shard do
// (the benchmarks' shared-homes counts them).
//
// A Lane keeps the blocks it hands out when they are freed (lane_cache.go): live in the
// library, and handed out again to the shard's next request of the same rounded size
// without a cgo call, so a steady loop of Alloc and Free on a Lane makes no crossing at
// all. Misuse of such a block is answered at the call (ErrDoubleFree, ErrStale as a
// *FreeError); the library's stats are exact whenever it is asked (Stats, Reset and every
// whole-arena call give the kept blocks back first).
//
// Step plans come first: they are on by default, and while they follow the requests (the
// library learns a step, or a plan serves it: then the planned path makes no crossing
// either) a Lane keeps nothing, since a kept block would hide requests from the learner
// and the plan. A Lane keeps blocks with FlagNoPlan (ZARENA_PLAN=0), and with plans on
// whenever they learn and serve nothing: in a program that marks no steps (the learner
// gives up after 64k allocations before the first boundary), during a step too long to
// learn, while learning pauses after steps that do not repeat. The library says which
// (zarena_kept_report_add); the binding asks at every step boundary and floor change, and
// every 1024 crossings of a shard while refused. Nothing is kept with a trace,
// FlagDiagnoseSync or poison on.
//
// A goroutine without a Lane calls the Arena: its shard is the one its stack address names
// (shared now and then with another goroutine's), its Alloc crosses into the library every
// time (with the frees queued on its shard), and nothing is kept for it; a block it frees is
// queued for the library, also one a Lane handed out.
//
// Everything else is the Arena's: the plan, ordering, Close, errors. A Lane may be used from
// any number of goroutines (they then share its shard and its kept blocks); it is a value,
// cheap to copy, valid as long as its Arena.
//
// A Lane made by NewLane also owns a lane of the library (zarena/zarena_lane.h): a region
// slot of its own and a step plan of its own. One stream (one worker goroutine) = one Lane
// = one slot = one plan: the Lane's requests are one sequence, learned, planned and served
// apart from every other Lane's and from the Arena's own plan, so goroutines sharing an
// arena each have their step planned. Its step ends at Lane.StepBegin and at every
// Arena.Reset. Under its plan, Alloc, AllocBlock, AllocTagged, Free and FreeBlock follow the
// plan's protocol in Go, on the Lane's own plan view (plan.go), with no cgo call; what the
// plan does not serve crosses into the library through the lane, on the Lane's shard. Such a
// Lane keeps no blocks (its plan is what makes its pair cheap). A block belongs to the
// Arena, not to the Lane: any goroutine frees it, through any Lane or none (a free the
// Lane's view does not cover is queued for the library, which finds the right zone). The
// zones of several Lanes' plans never overlap: each is claimed from the region around the
// others. A NewLane Lane is meant for one goroutine at a time; two at once are safe (its
// crossings take its shard's lock) but their requests interleave into one sequence, which
// a plan does not follow. Close gives its lane back (at most 64 per Arena at once).
type Lane struct {
	a     *Arena
	frame uintptr // an address that home maps to the Lane's shard
	c     *laneC  // NewLane's: the library's lane (nil: a shard only)
}

// laneC is the library's lane a Lane owns (zarena_lane.h).
type laneC struct {
	h    C.uintptr_t              // the lane; 0 once closed (every shard locked to change it)
	plan atomic.Pointer[planView] // its plan, served without crossings (plan.go)
}

// Lane returns a new Lane of a (a shard of its own; see NewLane for a plan of its own).
func (a *Arena) Lane() Lane {
	if a.keepOK && a.kept.tab.Load() == nil { // the index of the blocks Lanes hand out
		a.kept.wantGrow.Store(true)
		a.growKept()
	}
	return Lane{a: a, frame: a.laneFrame()}
}

// laneFrame is the frame of the next Lane's shard.
func (a *Arena) laneFrame() uintptr {
	i := uintptr(a.lanes.Add(1)-1) & uintptr(a.mask)
	// home(i << 11) is i: no higher bits to fold in below len(shards) buckets.
	return i << 11
}

// NewLane returns a Lane that owns a lane of the library: its own region slot and its own
// step plan (see Lane). Close gives it back. ErrOutOfMemory when the arena has 64 lanes
// already; ErrUnsupported with a library that has no lanes (zarena_dlopen mode).
func (a *Arena) NewLane() (Lane, error) {
	if C.shim_lanes_available() == 0 {
		return Lane{}, newError(StatusUnsupported, "NewLane: the loaded libzarena has no lanes (zarena_lane.h)")
	}
	l := Lane{a: a, frame: a.laneFrame(), c: &laneC{}}
	err := a.whole("NewLane", func(h C.uintptr_t) C.shim_result {
		r := C.shim_lane_create(h)
		if r.r.status == C.ZARENA_OK {
			l.c.h = C.uintptr_t(r.lane)
			if a.served.slots == nil { // before the lane's first view (plan.go)
				a.served.init()
			}
			a.cLanes = append(a.cLanes, l.c)
		}
		return r.r
	})
	if err != nil {
		return Lane{}, err
	}
	return l, nil
}

// Close gives a NewLane Lane's lane back: its plan serves no more (its blocks stay live,
// and any goroutine frees them). A second Close, and Close of a Lane without a lane, do
// nothing; after the Arena's Close, nothing either.
func (l Lane) Close() error {
	if l.c == nil {
		return nil
	}
	a := l.a
	err := a.whole("Lane.Close", func(h C.uintptr_t) C.shim_result {
		c := l.c
		if c.h == 0 {
			return C.shim_result{}
		}
		r := C.shim_lane_destroy(h, c.h)
		c.h = 0
		c.plan.Store(nil) // views stay valid until the arena's destroy: no wait
		for i, o := range a.cLanes {
			if o == c {
				a.cLanes = append(a.cLanes[:i], a.cLanes[i+1:]...)
				break
			}
		}
		return r
	})
	if errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}

// StepBegin marks the top of the Lane's step (zarena_lane_step_begin), after the frees
// queued on its shard; a Lane without a lane of its own has the Arena's (Arena.StepBegin).
func (l Lane) StepBegin() error {
	if l.c == nil {
		return l.a.StepBegin()
	}
	a := l.a
	s := a.lockLane(l.frame)
	if err := l.closedLocked("Lane.StepBegin"); err != nil {
		s.mu.Unlock()
		return err
	}
	r := C.shim_lane_step_begin(a.h, l.c.h, s.buf, C.size_t(s.n))
	if s.n > 0 {
		a.applied(s, r.queued_failed)
	}
	v := r.view
	if a.poison { // the library fills freed blocks: nothing served here
		v = nil
	}
	l.c.setView(a, v)
	s.mu.Unlock()
	if r.r.status != C.ZARENA_OK || r.queued_failed != 0 {
		return a.allocFailed(r.r.status, r.r.err)
	}
	return nil
}

// setView caches the lane's view v (nil: none); a shard lock held. A planView is built once
// per plan.
func (c *laneC) setView(a *Arena, v *C.zarena_plan_view) {
	cur := c.plan.Load()
	if cur != nil && cur.view == v {
		return
	}
	pl := newPlanView(v)
	c.plan.Store(pl)
	if pl != nil {
		a.planUnwaited.Store(true)
	}
}

// setLaneViewsLocked fetches every Lane's view after a boundary of the arena (every shard
// locked): a reset is every lane's step boundary.
func (a *Arena) setLaneViewsLocked() {
	for _, c := range a.cLanes {
		var v *C.zarena_plan_view
		if !a.poison && a.h != 0 && c.h != 0 {
			v = C.shim_lane_plan_view(a.h, c.h)
		}
		c.setView(a, v)
	}
}

// closedLocked is ErrClosed for a closed Arena, ErrInvalidArgument for a closed Lane, else
// nil (a shard lock held).
func (l Lane) closedLocked(op string) error {
	if l.a.h == 0 {
		return errClosed(op)
	}
	if l.c.h == 0 {
		return newError(StatusInvalidArgument, op+": the Lane was closed")
	}
	return nil
}

// lockLane locks the Lane's own shard (its home exactly, waiting for it: two goroutines on
// one Lane take turns, so the library never finds the lane in use).
func (a *Arena) lockLane(frame uintptr) *shard {
	s := &a.shards[a.home(frame)]
	s.mu.Lock()
	return s
}

// LaneStats is one Lane's share of the plans (zarena_lane_stats).
type LaneStats struct {
	Slot          uint32 // its region slot
	PlanSteps     uint64 // steps its plan served whole
	PlanHits      uint64 // allocations its plan served (here and in the library)
	PlanMisses    uint64 // steps a deviation ended
	PlanFirstMiss uint64 // why the first one did (PlanMiss*)
	PlansLearned  uint64
	PlanBytes     uint64 // its latest plan's own bytes
	PlanZoneBytes uint64 // the zone it holds now
	PlanLiveBytes uint64 // its planned blocks live now
	PlanLiveCount uint64
}

// Stats is the Lane's share (a Lane without a lane of its own: ErrInvalidArgument).
func (l Lane) Stats() (LaneStats, error) {
	if l.c == nil {
		return LaneStats{}, newError(StatusInvalidArgument, "Lane.Stats: the Lane has no lane of its own (NewLane makes one)")
	}
	return wholeValue(l.a, "Lane.Stats", func(h C.uintptr_t) (C.shim_lane_stats_result, C.shim_result) {
		if l.c.h == 0 {
			return C.shim_lane_stats_result{}, C.shim_result{status: C.ZARENA_E_INVALID_ARGUMENT}
		}
		r := C.shim_lane_stats(h, l.c.h)
		return r, r.r
	}, func(r *C.shim_lane_stats_result) LaneStats {
		s := &r.s
		return LaneStats{Slot: uint32(s.slot), PlanSteps: uint64(s.plan_steps),
			PlanHits: uint64(s.plan_hits), PlanMisses: uint64(s.plan_misses),
			PlanFirstMiss: uint64(s.plan_first_miss), PlansLearned: uint64(s.plans_learned),
			PlanBytes: uint64(s.plan_bytes), PlanZoneBytes: uint64(s.plan_zone_bytes),
			PlanLiveBytes: uint64(s.plan_live_bytes), PlanLiveCount: uint64(s.plan_live_count)}
	})
}

// allocLane is a NewLane Lane's allocation: its plan, else a crossing through its lane.
func (l Lane) allocLane(n uint64, tag Tag, op string) (Block, error) {
	a := l.a
	unplanned := C.int(0)
	if l.c.plan.Load() != nil {
		switch p, epoch, r := a.allocPlannedIn(&l.c.plan, n, tag); r {
		case planServed:
			return Block{Ptr: p, Epoch: epoch, Size: (n + a.align - 1) &^ (a.align - 1),
				Flags: BlockPlanned, Tag: tag}, nil
		case planUnplanned:
			unplanned = 1
		}
	}
	return l.allocCross(n, tag, op, unplanned)
}

// allocCross is a NewLane Lane's crossing (after the frees queued on its shard); unplanned:
// the Lane's plan left the request to the library (rule 4).
func (l Lane) allocCross(n uint64, tag Tag, op string, unplanned C.int) (Block, error) {
	a := l.a
	s := a.lockLane(l.frame)
	if err := l.closedLocked(op); err != nil {
		s.mu.Unlock()
		return Block{}, err
	}
	r := C.shim_lane_alloc(a.h, l.c.h, s.buf, C.size_t(s.n), C.uint64_t(n), C.uint32_t(tag), unplanned)
	if s.n > 0 {
		a.applied(s, r.queued_failed)
	}
	s.mu.Unlock()
	return a.blockOf(r)
}

// freeLane is a NewLane Lane's free: its plan's plain case here, else as Arena.Free (the
// Arena's plan, else queued on the Lane's shard).
func (l Lane) freeLane(p DevicePtr, epoch uint64) error {
	if l.c.plan.Load() != nil && l.a.freePlannedIn(&l.c.plan, p, epoch) {
		return nil
	}
	return l.a.queueFree(l.frame, p, epoch, false)
}

// Alloc is Arena.Alloc on the Lane's shard, served from a block the shard keeps when one of
// the size is there (no cgo call); a NewLane Lane's from its plan when planned.
func (l Lane) Alloc(n uint64) (DevicePtr, error) {
	if l.c != nil {
		if n == 0 {
			return 0, nil
		}
		// The planned case without a Block: its copies cost the pair (see planView.alloc).
		unplanned := C.int(0)
		if l.c.plan.Load() != nil {
			switch p, _, r := l.a.allocPlannedIn(&l.c.plan, n, 0); r {
			case planServed:
				return p, nil
			case planUnplanned:
				unplanned = 1
			}
		}
		b, err := l.allocCross(n, 0, "Alloc", unplanned)
		return b.Ptr, err
	}
	return l.a.allocKept(l.frame, n)
}

// AllocBlock is Arena.AllocBlock on the Lane's shard, served like Alloc (a kept block comes
// back with BlockReused).
func (l Lane) AllocBlock(n uint64) (Block, error) {
	if l.c != nil {
		return l.allocLane(n, 0, "AllocBlock")
	}
	return l.a.allocBlockKept(l.frame, n, "AllocBlock")
}

// AllocTagged is Arena.AllocTagged on the Lane's shard (tag 0: AllocBlock; tagged blocks
// are never kept).
func (l Lane) AllocTagged(n uint64, tag Tag) (Block, error) {
	if l.c != nil {
		return l.allocLane(n, tag, "AllocTagged")
	}
	if tag == 0 {
		return l.a.allocBlockKept(l.frame, n, "AllocTagged")
	}
	return l.a.allocBlock(l.frame, n, tag, "AllocTagged")
}

// Free is Arena.Free on the Lane's shard, which keeps the block when the Lane handed it
// out (see Lane). Its error is ErrClosed, or a *FreeError at once for a free the binding
// can judge (a block kept already: ErrDoubleFree). A NewLane Lane's plan frees its planned
// blocks here.
func (l Lane) Free(p DevicePtr) error {
	if l.c != nil {
		return l.freeLane(p, AnyEpoch)
	}
	return l.a.freeKept(l.frame, p, AnyEpoch)
}

// FreeBlock is Free checked against b.Epoch (a tracked block of another epoch: ErrStale at
// once).
func (l Lane) FreeBlock(b Block) error {
	if l.c != nil {
		return l.freeLane(b.Ptr, b.Epoch)
	}
	return l.a.freeKept(l.frame, b.Ptr, b.Epoch)
}

// Arena is the Lane's arena.
func (l Lane) Arena() *Arena { return l.a }
