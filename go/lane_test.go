package zarena

import (
	"errors"
	"sync"
	"testing"
)

// Lanes made one after another name different shards until the shards run out.
func TestLanesTakeTheShardsInTurn(t *testing.T) {
	a := newHostShards(t, Config{CapacityBytes: miB}, 8)
	for k := 0; k < 20; k++ {
		if got := a.home(a.Lane().frame); got != uint32(k%8) {
			t.Fatalf("lane %d: shard %d, want %d", k, got, k%8)
		}
	}
}

// A Lane's Free of a block it did not hand out (the Arena's: the Lane keeps none of those)
// rides on the Lane's next allocation, wherever each is called from.
func TestLaneFreeRidesOnItsNextAlloc(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 4 * miB})
	l := a.Lane()
	p, err := a.Alloc(4 * kiB)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Alloc(4 * kiB); err != nil { // p is not the top block
		t.Fatal(err)
	}
	_, before := a.queueCounts()
	free := func() error { return l.Free(p) } // another frame than the allocation's
	if err := free(); err != nil {
		t.Fatal(err)
	}
	mustReuseFreed(t, a, p, before, "Lane.AllocBlock after Lane.Free", l.AllocBlock)
	tb, err := l.AllocTagged(kiB, 0)
	if err != nil || l.FreeBlock(tb) != nil || l.Arena() != a {
		t.Fatalf("AllocTagged %+v, %v", tb, err)
	}
}

// Goroutines with a Lane each, and goroutines without, on one arena, then Close while they
// run: no block handed out twice while live, later calls get ErrClosed.
func TestLanesConcurrentWithCallsAndClose(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 64 * miB, Flags: FlagNoPlan}) // Lanes keep blocks
	var live sync.Map
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			l := a.Lane()
			alloc, free := l.Alloc, l.Free
			if g%2 == 1 {
				alloc, free = a.Alloc, a.Free
			}
			for i := 0; i < 300; i++ {
				p, err := alloc(uint64(256 * (1 + i%7)))
				if err != nil {
					if !errors.Is(err, ErrClosed) {
						t.Error(err)
					}
					return
				}
				if _, dup := live.LoadOrStore(p, g); dup {
					t.Errorf("block %#x handed out while live", p)
					return
				}
				live.Delete(p)
				if err := free(p); err != nil {
					if !errors.Is(err, ErrClosed) {
						t.Error(err)
					}
					return
				}
				if g == 0 && i == 200 {
					go a.Close()
				}
			}
		}(g)
	}
	wg.Wait()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}
