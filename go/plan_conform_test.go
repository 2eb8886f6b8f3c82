package zarena

import (
	"fmt"
	"math/rand"
	"reflect"
	"testing"
	"unsafe"

	"github.com/zarena/zarena/go/internal/cgotest"
)

// The step plan protocol has two implementations: the library's (PlanRun, src/plan/), which
// zarena_alloc_ex and zarena_free_at run, and the binding's (planView, plan.go), which
// Alloc, Free and FreeBlock run without crossing and which leaves every other case to the
// library. The conformance test runs both over the same random traces: an arena driven
// through the C API alone (internal/cgotest) and one driven through this package, same
// configuration, same calls in the same order, on one OS thread. Steps repeat with
// deviations (another size or tag, an extra, a missing or a late allocation, a reset
// mid-step, a floor over everything) and misuse (double frees, stale frees, frees of
// another epoch, of interior and foreign pointers, frees of pinned blocks, pins and unpins).
// Every answer must be the same (status, the block's offset in the region, its epoch, size
// and flags), and at every step boundary so must the plan's state (every word, born, dlast,
// cursor, state, hits, miss) and every stats field. The binding must actually serve.

// conformPair is the two arenas and what the trace knows of their blocks (offsets from
// each region's base: both hand out the same ones, or the test fails).
type conformPair struct {
	t              *testing.T
	a              *Arena
	c              uintptr // the C-driven arena
	goBase, cBase  uintptr
	rng            *rand.Rand
	live           []conformBlock // handed out, not freed
	freed          []conformBlock // freed (for double frees)
	reclaimed      []conformBlock // live at the last reset (for stale frees)
	pinned         []conformBlock
	where          string
	ops, answersOK int
}

type conformBlock struct {
	off, epoch, size uint64
}

func newConformPair(t *testing.T, seed int64) *conformPair {
	t.Helper()
	a := newHostShards(t, Config{CapacityBytes: 16 * miB, Alignment: planAlign,
		OverflowPolicy: OverflowRefuse, Flags: FlagPlan, Name: fmt.Sprintf("conform-go-%d", seed)}, 1)
	c := cgotest.NewPlanArena(16*miB, planAlign)
	if c == 0 {
		t.Fatal("cannot create the C-driven arena")
	}
	t.Cleanup(func() { cgotest.DestroyArena(c) })
	return &conformPair{t: t, a: a, c: c, goBase: a.base, cBase: cgotest.Base(c),
		rng: rand.New(rand.NewSource(seed))}
}

// goHandle is the Go arena's library handle (the test's one goroutine holds no shard).
func (p *conformPair) goHandle() uintptr { return uintptr(p.a.h) }

func (p *conformPair) fail(format string, args ...any) {
	p.t.Helper()
	p.t.Fatalf("%s (op %d): %s", p.where, p.ops, fmt.Sprintf(format, args...))
}

// goFreeStatus is the outcome of the Go arena's free just made: its own error, or the
// failure the library recorded when the queue was applied (FreeErrors applies it).
func (p *conformPair) goFreeStatus(err error) Status {
	errs := p.a.FreeErrors()
	if err != nil {
		return StatusOf(err)
	}
	switch len(errs) {
	case 0:
		return StatusOK
	case 1:
		return StatusOf(errs[0])
	}
	p.fail("%d queued frees failed for one free: %v", len(errs), errs)
	return StatusInternal
}

// alloc allocates on both (how: 0 AllocTagged, 1 AllocBlock, 2 Alloc) and compares.
func (p *conformPair) alloc(size uint64, tag Tag, how int) {
	p.ops++
	if tag != 0 {
		how = 0
	}
	cb := cgotest.AllocEx(p.c, size, uint32(tag))
	var gb Block
	var err error
	switch how {
	case 0:
		gb, err = p.a.AllocTagged(size, tag)
	case 1:
		gb, err = p.a.AllocBlock(size)
	default:
		var ptr DevicePtr
		ptr, err = p.a.Alloc(size)
		gb = Block{Ptr: ptr}
	}
	if st := StatusOf(err); int32(st) != cb.Status {
		p.fail("alloc %d tag %d: Go %v, C status %d", size, tag, err, cb.Status)
	}
	if cb.Status != 0 {
		return
	}
	off := uint64(cb.Ptr - p.cBase)
	if uint64(uintptr(gb.Ptr)-p.goBase) != off {
		p.fail("alloc %d tag %d: Go +%d, C +%d (C flags %#x)", size, tag,
			uint64(uintptr(gb.Ptr)-p.goBase), off, cb.Flags)
	}
	if how != 2 && (gb.Epoch != cb.Epoch || gb.Size != cb.Size || uint32(gb.Flags) != cb.Flags) {
		p.fail("alloc %d tag %d: Go epoch %d size %d flags %#x, C epoch %d size %d flags %#x",
			size, tag, gb.Epoch, gb.Size, gb.Flags, cb.Epoch, cb.Size, cb.Flags)
	}
	p.answersOK++
	p.live = append(p.live, conformBlock{off: off, epoch: cb.Epoch, size: cb.Size})
}

// free frees the block at off on both (checked: naming epoch; else any epoch) and compares.
func (p *conformPair) free(off, epoch uint64, checked bool) Status {
	p.ops++
	want := AnyEpoch
	if checked {
		want = epoch
	}
	cs := cgotest.FreeAt(p.c, p.cBase+uintptr(off), want)
	var err error
	if checked {
		err = p.a.FreeBlock(Block{Ptr: DevicePtr(p.goBase + uintptr(off)), Epoch: epoch})
	} else {
		err = p.a.Free(DevicePtr(p.goBase + uintptr(off)))
	}
	if gs := p.goFreeStatus(err); int32(gs) != cs {
		p.fail("free of +%d (epoch %d, checked %v): Go %v, C %v", off, epoch, checked, gs,
			Status(cs))
	}
	p.answersOK++
	return Status(cs)
}

func (p *conformPair) pin(b conformBlock, pin bool) Status {
	p.ops++
	cs := cgotest.Pin(p.c, p.cBase+uintptr(b.off), pin)
	var err error
	if pin {
		err = p.a.Pin(DevicePtr(p.goBase + uintptr(b.off)))
	} else {
		err = p.a.Unpin(DevicePtr(p.goBase + uintptr(b.off)))
	}
	if gs := StatusOf(err); int32(gs) != cs {
		p.fail("pin %v of +%d: Go %v, C %v", pin, b.off, gs, Status(cs))
	}
	p.answersOK++
	return Status(cs)
}

// control makes a boundary call on both (0 StepBegin, 1 Reset, 2 MarkStepBoundary), then
// compares the whole state.
func (p *conformPair) control(what int) {
	p.ops++
	var cs int32
	var err error
	switch what {
	case 0:
		cs, err = cgotest.StepBegin(p.c), p.a.StepBegin()
	case 1:
		cs, err = cgotest.Reset(p.c), p.a.Reset()
	default:
		cs, err = cgotest.MarkStepBoundary(p.c), p.a.MarkStepBoundary()
	}
	if gs := StatusOf(err); int32(gs) != cs {
		p.fail("boundary %d: Go %v, C %v", what, gs, Status(cs))
	}
	if ge, ce := p.a.Epoch(), cgotest.Epoch(p.c); ge != ce {
		p.fail("epoch: Go %d, C %d", ge, ce)
	}
	p.compareState()
}

// compareState compares the plans' state and the stats of both arenas (the Go arena's
// queued frees applied first).
func (p *conformPair) compareState() {
	p.t.Helper()
	if errs := p.a.FreeErrors(); len(errs) != 0 {
		p.fail("queued frees failed unseen: %v", errs)
	}
	h := p.goHandle()
	// The view the binding serves from is the library's current one.
	cur := cgotest.PlanView(h)
	if pl := p.a.plan.Load(); (pl == nil) != (cur == 0) ||
		(pl != nil && uintptr(unsafe.Pointer(pl.view)) != cur) {
		p.fail("the binding's view %p is not the library's %#x", pl, cur)
	}
	gs, cs := cgotest.PlanState(h, p.goBase), cgotest.PlanState(p.c, p.cBase)
	if !reflect.DeepEqual(gs, cs) {
		p.fail("plan state differs:\n Go %v\n C  %v", gs, cs)
	}
	gst, cst := cgotest.Stats(h), cgotest.Stats(p.c)
	if len(gst) != len(cst) || len(gst) == 0 {
		p.fail("stats: %d and %d fields", len(gst), len(cst))
	}
	names := reflect.TypeOf(Stats{})
	for i := range gst {
		if gst[i] != cst[i] {
			name := fmt.Sprint(i)
			if i < names.NumField() {
				name = names.Field(i).Name
			}
			p.fail("stats field %s: Go %d, C %d", name, gst[i], cst[i])
		}
	}
}

// pick removes and returns a random element of *list.
func (p *conformPair) pick(list *[]conformBlock) (conformBlock, bool) {
	if len(*list) == 0 {
		return conformBlock{}, false
	}
	i := p.rng.Intn(len(*list))
	b := (*list)[i]
	*list = append((*list)[:i], (*list)[i+1:]...)
	return b, true
}

// freeLive frees the live block at off (it leaves the live list; on OK it joins freed).
func (p *conformPair) freeLive(off uint64, checked bool) {
	for i, b := range p.live {
		if b.off == off {
			p.live = append(p.live[:i], p.live[i+1:]...)
			if p.free(b.off, b.epoch, checked) == StatusOK {
				p.freed = append(p.freed, b)
				if len(p.freed) > 32 {
					p.freed = p.freed[1:]
				}
			}
			return
		}
	}
}

// misuse makes one wrong call (both arenas must give the same answer and change nothing).
func (p *conformPair) misuse() {
	switch p.rng.Intn(6) {
	case 0: // a double free
		if b, ok := p.pick(&p.freed); ok {
			p.free(b.off, b.epoch, p.rng.Intn(2) == 0)
		}
	case 1: // a block reclaimed by a reset (named with its epoch when its offset is live again)
		if b, ok := p.pick(&p.reclaimed); ok {
			checked := p.rng.Intn(2) == 0
			for _, q := range p.live {
				checked = checked || q.off == b.off
			}
			p.free(b.off, b.epoch, checked)
		}
	case 2: // a live block named with another epoch
		if len(p.live) > 0 {
			b := p.live[p.rng.Intn(len(p.live))]
			p.free(b.off, b.epoch+1+uint64(p.rng.Intn(3)), true)
		}
	case 3: // an interior pointer of a live block, or one no block starts at
		off := uint64(p.rng.Intn(16*miB/planAlign)) * planAlign
		if len(p.live) > 0 && p.rng.Intn(2) == 0 {
			b := p.live[p.rng.Intn(len(p.live))]
			off = b.off + planAlign*uint64(1+p.rng.Intn(int(max(b.size/planAlign, 2)-1)))
		}
		if p.rng.Intn(4) == 0 {
			off += 8 // not even aligned
		}
		for _, b := range p.live {
			if b.off == off {
				return // a block starts there after all
			}
		}
		p.free(off, p.a.Epoch(), p.rng.Intn(2) == 0)
	case 4: // pin a live block (freed later while pinned, maybe, then unpinned)
		if len(p.live) > 0 {
			b := p.live[p.rng.Intn(len(p.live))]
			if p.pin(b, true) == StatusOK {
				p.pinned = append(p.pinned, b)
			}
		}
	case 5: // unpin one
		if b, ok := p.pick(&p.pinned); ok {
			p.pin(b, false)
		}
	}
}

// runConformance runs one seed's trace; it returns how many allocations the binding served.
func runConformance(t *testing.T, seed int64) uint64 {
	p := newConformPair(t, seed)
	rng := p.rng
	tags := []Tag{0, 0, mustTag(t, "conform.a"), mustTag(t, "conform.b")}
	base := makePlanStep(rng, 8+rng.Intn(40), tags)
	resets := seed%2 == 0
	served := p.a.planServed()
	type carriedBlock struct {
		off uint64
		due int // the step that frees it
	}
	var carried []carriedBlock
	for step := 0; step < 24; step++ {
		p.where = fmt.Sprintf("seed %d step %d", seed, step)
		p.control(0)
		items := append([]planItem(nil), base...)
		deviate := step >= 3 && rng.Intn(4) == 0
		kind, at := rng.Intn(8), rng.Intn(len(items))
		if deviate {
			switch kind {
			case 0:
				items[at].size += planAlign
			case 1:
				items[at].tag = tags[(rng.Intn(len(tags)-1)+1)%len(tags)]
			case 2:
				items = withExtraItem(items, at)
			case 3:
				freeLate(items, at)
			}
		}
		n := len(items)
		offs := make([]uint64, n)
		have := make([]bool, n)
		freesBefore := planFrees(items)
		for i := 0; i <= n; i++ {
			checked := rng.Intn(2) == 0
			for _, j := range freesBefore[i] {
				if have[j] {
					p.freeLive(offs[j], checked)
					have[j] = false
				}
			}
			if i == 2 || i == n {
				kept := carried[:0]
				for _, c := range carried {
					if c.due <= step {
						p.freeLive(c.off, checked)
					} else {
						kept = append(kept, c)
					}
				}
				carried = kept
			}
			if rng.Intn(12) == 0 {
				p.misuse()
			}
			if i == n || (deviate && kind == 4 && i == at) { // the end, or a missing allocation
				continue
			}
			before := len(p.live)
			p.alloc(items[i].size, items[i].tag, rng.Intn(3))
			if len(p.live) > before {
				offs[i], have[i] = p.live[len(p.live)-1].off, true
			}
			switch {
			case deviate && kind == 5 && i == at && resets: // a reset mid-step
				p.reset()
				clear(have)
			case deviate && kind == 6 && i == at: // the floor over everything
				p.control(2)
			}
		}
		if resets {
			p.reset()
		} else { // the kept blocks die in the next step, after its first allocations, or
			// (a deviation) a few steps later
			for i := range items {
				if have[i] {
					due := step + 1
					if deviate && kind == 7 {
						due += 1 + rng.Intn(3)
					}
					carried = append(carried, carriedBlock{offs[i], due})
				}
			}
		}
	}
	for _, b := range p.pinned {
		p.pin(b, false)
	}
	p.control(1)
	return p.a.planServed() - served
}

// reset resets both; what was live and not pinned is reclaimed (kept for stale frees).
func (p *conformPair) reset() {
	p.reclaimed = p.reclaimed[:0]
	kept := p.live[:0]
	for _, b := range p.live {
		pinned := false
		for _, q := range p.pinned {
			pinned = pinned || q.off == b.off
		}
		if pinned {
			kept = append(kept, b)
		} else {
			p.reclaimed = append(p.reclaimed, b)
		}
	}
	p.live = kept
	p.freed = p.freed[:0]
	p.control(1)
}

func TestPlanConformance(t *testing.T) {
	// One thread: the library's plan follows the threads that learned it.
	defer lockThread()()
	captureLogs(t, "", LevelError) // the misuse's warnings are expected
	seeds := 24
	if testing.Short() {
		seeds = 6
	}
	var served uint64
	for seed := int64(0); seed < int64(seeds); seed++ {
		served += runConformance(t, seed)
	}
	if served < uint64(seeds)*40 {
		t.Fatalf("the binding served %d allocations over %d traces: the test compared too "+
			"little of its planned path", served, seeds)
	}
	t.Logf("%d traces; the binding served %d allocations from plans", seeds, served)
}
