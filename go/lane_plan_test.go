//go:build cgo

package zarena

import (
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"testing"
)

// Lanes with plans of their own (NewLane; zarena_lane.h): the model test of plan_test.go
// with several Lanes, each a goroutine repeating a step of its own (random deviations,
// frees through another Lane or the Arena, resets of the whole arena between rounds). Every
// block handed out must lie in the region and overlap none held; at quiet points the
// library's live blocks and stats are the model's. Each Lane's plan must serve (its
// PlanHits), and the binding must serve some of it without crossings (planServed).

// laneRound runs steps of base on Lane l; what it keeps goes to out (freed after the round).
func laneRound(m *planModel, l Lane, rng *rand.Rand, base []planItem, steps int, dev float64,
	stepBegin bool, out *[]uint64, name string) error {
	for step := 0; step < steps; step++ {
		where := fmt.Sprintf("%s step %d", name, step)
		if stepBegin {
			if err := l.StepBegin(); err != nil {
				return fmt.Errorf("%s: StepBegin: %w", where, err)
			}
		}
		items := append([]planItem(nil), base...)
		if dev > 0 && rng.Float64() < dev {
			switch at := rng.Intn(len(items)); rng.Intn(3) {
			case 0:
				items[at].size += planAlign
			case 1:
				items = withExtraItem(items, at)
			default:
				freeLate(items, at)
			}
		}
		frees := planFrees(items)
		ptr := make([]uint64, len(items))
		for i := 0; i <= len(items); i++ {
			for _, j := range frees[i] {
				epoch, ok := m.takeForFree(ptr[j], where)
				if !ok {
					continue
				}
				// Through the Lane: a free queued on another shard (Arena.Free) would reach
				// the library at a moment of that shard's, not at this point of the step.
				var err error
				if rng.Intn(2) == 0 {
					err = l.FreeBlock(Block{Ptr: DevicePtr(ptr[j]), Epoch: epoch})
				} else {
					err = l.Free(DevicePtr(ptr[j]))
				}
				if err != nil {
					return fmt.Errorf("%s: free: %w", where, err)
				}
			}
			if i == len(items) {
				break
			}
			b, err := l.AllocTagged(items[i].size, items[i].tag)
			if err != nil {
				return fmt.Errorf("%s item %d: %w", where, i, err)
			}
			m.handedOut(b, fmt.Sprintf("%s item %d", where, i))
			ptr[i] = uint64(b.Ptr)
		}
		for i, it := range items {
			if it.freeBefore == planKeep {
				*out = append(*out, ptr[i])
			}
		}
	}
	return nil
}

func runLanePlans(t *testing.T, lanes, rounds, steps int, dev float64, resets, stepBegin bool,
	seed int64) {
	a := newPlanArena(t, "lanes", 0)
	m := &planModel{t: t, a: a}
	rng := rand.New(rand.NewSource(seed))
	tags := []Tag{0, mustTag(t, "lane.a"), mustTag(t, "lane.b")}
	ls := make([]Lane, lanes)
	base := make([][]planItem, lanes)
	rngs := make([]*rand.Rand, lanes)
	for i := range ls {
		l, err := a.NewLane()
		if err != nil {
			t.Fatalf("NewLane %d: %v", i, err)
		}
		ls[i] = l
		base[i] = makePlanStep(rng, 10+rng.Intn(50), tags)
		rngs[i] = rand.New(rand.NewSource(rng.Int63()))
	}
	kept := make([][]uint64, lanes)
	for r := 0; r < rounds; r++ {
		var wg sync.WaitGroup
		errs := make([]error, lanes)
		for i := range ls {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				errs[i] = laneRound(m, ls[i], rngs[i], base[i], steps, dev, stepBegin, &kept[i],
					fmt.Sprintf("seed %d round %d lane %d", seed, r, i))
			}(i)
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		// What each Lane kept, freed through the next Lane (another Lane's zone or slot) or
		// through the Arena.
		for i := range ls {
			for k, p := range kept[i] {
				if epoch, ok := m.takeForFree(p, "kept"); ok {
					var err error
					if k%3 == 0 {
						err = a.Free(DevicePtr(p))
					} else {
						err = ls[(i+1)%lanes].FreeBlock(Block{Ptr: DevicePtr(p), Epoch: epoch})
					}
					if err != nil {
						t.Fatal(err)
					}
				}
			}
			kept[i] = kept[i][:0]
		}
		m.quiet(fmt.Sprintf("round %d", r))
		if resets {
			m.reset(fmt.Sprintf("round %d", r))
			if err := a.Reset(); err != nil {
				t.Fatal(err)
			}
			m.quiet(fmt.Sprintf("after the reset of round %d", r))
		}
	}
	var hits uint64
	for i, l := range ls {
		s, err := l.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if s.PlanHits == 0 {
			t.Errorf("lane %d was never planned: %+v", i, s)
		}
		hits += s.PlanHits
	}
	if st := mustStats(t, a); st.PlanHits != hits {
		t.Errorf("the arena counts %d planned allocations, its lanes %d", st.PlanHits, hits)
	}
	if a.planServed() == 0 {
		t.Errorf("the binding served no planned allocation itself")
	}
	for _, l := range ls {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLanePlansModel(t *testing.T) {
	for seed := int64(1); seed <= 3; seed++ {
		runLanePlans(t, 4, 2, 12, 0.1, true, true, seed)
	}
}

func TestLanePlansSixteenLanes(t *testing.T) { runLanePlans(t, 16, 3, 6, 0.05, true, true, 42) }

func TestLanePlansWithoutResets(t *testing.T) { runLanePlans(t, 4, 2, 12, 0, false, true, 7) }

// Each round one step of every Lane, ended by the Arena's Reset alone: the Lanes' views
// come with the reset (the binding serves their plans without a Lane.StepBegin).
func TestLanePlansResetsAlone(t *testing.T) { runLanePlans(t, 3, 10, 1, 0, true, false, 9) }

func TestLaneMisuse(t *testing.T) {
	a := newPlanArena(t, "lane-misuse", 0)
	l, err := a.NewLane()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Lane().Stats(); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Stats of a Lane without a lane: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	if _, err := l.Alloc(256); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Alloc on a closed Lane: %v", err)
	}
	if err := l.StepBegin(); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("StepBegin on a closed Lane: %v", err)
	}
	var ls []Lane
	for {
		l, err := a.NewLane()
		if err != nil {
			if !errors.Is(err, ErrOutOfMemory) || len(ls) != 64 {
				t.Errorf("after %d lanes: %v", len(ls), err)
			}
			break
		}
		ls = append(ls, l)
	}
	if err := ls[3].Close(); err != nil {
		t.Fatal(err)
	}
	l2, err := a.NewLane()
	if err != nil {
		t.Fatalf("a closed Lane's place: %v", err)
	}
	if _, err := l2.Alloc(300); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l2.Alloc(256); !errors.Is(err, ErrClosed) {
		t.Errorf("Alloc after the Arena's Close: %v", err)
	}
	if err := l2.Close(); err != nil {
		t.Errorf("Close after the Arena's Close: %v", err)
	}
}
