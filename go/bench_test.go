package zarena

import (
	"testing"

	"github.com/zarena/zarena/go/internal/cgotest"
)

// The binding's price is its cgo calls: compare BenchmarkAllocFree (one Alloc + one
// Free) with BenchmarkEmptyCgoPair (two calls of an empty C function) from the same
// run; the C-level cost of alloc+free is in bench/.

func BenchmarkEmptyCgoPair(b *testing.B) {
	for i := 0; i < b.N; i++ {
		cgotest.Empty()
		cgotest.Empty()
	}
}

func BenchmarkAllocFree(b *testing.B) {
	a := newHost(b, Config{CapacityBytes: 64 * miB, Name: "bench"})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p, err := a.Alloc(4096)
		if err != nil {
			b.Fatal(err)
		}
		if err := a.Free(p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAllocReset: 1024 allocations then one Reset; the time is per allocation
// (the reset's share included).
func BenchmarkAllocReset(b *testing.B) {
	const perStep = 1024
	a := newHost(b, Config{CapacityBytes: 64 * miB, Name: "bench"})
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		if _, err := a.Alloc(4096); err != nil {
			b.Fatal(err)
		}
		if n++; n == perStep {
			n = 0
			if err := a.Reset(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkAllocFreeParallel(b *testing.B) {
	a := newHost(b, Config{CapacityBytes: 256 * miB, Name: "bench"})
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, err := a.Alloc(4096)
			if err != nil {
				b.Error(err)
				return
			}
			if err := a.Free(p); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
