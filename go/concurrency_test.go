package zarena

import (
	"math/rand"
	"sync"
	"testing"

	"github.com/zarena/zarena/go/internal/cgotest"
)

// Goroutines allocate, tag their blocks' memory, and verify the tag before each free:
// a block handed to two goroutines at once shows up as a foreign tag.
func TestConcurrentAllocFree(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 64 * miB, OverflowPolicy: OverflowSync})
	const goroutines, iters = 8, 3000
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(g)))
			tag := byte(g + 1)
			type block struct {
				p DevicePtr
				n uint64
			}
			var live []block
			for i := 0; i < iters; i++ {
				if len(live) > 0 && (rng.Intn(2) == 0 || len(live) > 64) {
					k := rng.Intn(len(live))
					b := live[k]
					live[k] = live[len(live)-1]
					live = live[:len(live)-1]
					if !cgotest.Check(uintptr(b.p), b.n, tag) {
						errs <- errorf("goroutine %d: block %#x of %d bytes was overwritten", g, b.p, b.n)
						return
					}
					if err := a.Free(b.p); err != nil {
						errs <- err
						return
					}
					continue
				}
				n := uint64(1 + rng.Intn(16*kiB))
				p, err := a.Alloc(n)
				if err != nil {
					errs <- err
					return
				}
				cgotest.Tag(uintptr(p), n, tag)
				live = append(live, block{p, n})
			}
			for _, b := range live {
				if err := a.Free(b.p); err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	// Readers run alongside: stats and epoch are thread-safe.
	done := make(chan struct{})
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			select {
			case <-done:
				return
			default:
				_, _ = a.Stats()
				_ = a.Epoch()
			}
		}
	}()
	wg.Wait()
	close(done)
	<-readerDone
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	s := mustStats(t, a)
	if s.LiveAllocs != 0 || s.UsedBytes != 0 || s.InvalidFrees != 0 || len(a.FreeErrors()) != 0 {
		t.Fatalf("after every block was freed: %+v", s)
	}
	if s.Hits+s.Misses != s.EpochAllocs {
		t.Fatalf("hits %d + misses %d != allocs %d", s.Hits, s.Misses, s.EpochAllocs)
	}
}
