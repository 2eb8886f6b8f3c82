//go:build cgo

package zarena

// Lane is one goroutine's own way into an arena: the Alloc and Free of a Lane use a shard of
// the free queue of their own (freequeue.go), chosen when the Lane is made, instead of the
// shard an address in the caller's stack names. Lanes made one after another get different
// shards until the shards run out (there are at least twice GOMAXPROCS at New), so worker
// goroutines that each hold a Lane never find their shard held by another, where goroutines
// whose stacks happen to name the same shard do (the benchmarks' shared-homes counts them).
// A goroutine's Free and its next Alloc on the same Lane meet on one shard wherever they
// are called from, so the allocation applies the frees just queued.
//
// Everything else is the Arena's: the plan, ordering, Close, errors. A Lane may be used from
// any number of goroutines (they then share its shard, as colliding homes do); it is a value,
// cheap to copy, valid as long as its Arena.
type Lane struct {
	a    *Arena
	here uintptr // an address that home maps to the Lane's shard
}

// Lane returns a new Lane of a.
func (a *Arena) Lane() Lane {
	i := uintptr(a.lanes.Add(1)-1) & uintptr(a.mask)
	// home(i << 11) is i: no higher bits to fold in below len(shards) buckets.
	return Lane{a: a, here: i << 11}
}

// Alloc is Arena.Alloc on the Lane's shard.
func (l Lane) Alloc(n uint64) (DevicePtr, error) { return l.a.alloc(l.here, n) }

// AllocBlock is Arena.AllocBlock on the Lane's shard.
func (l Lane) AllocBlock(n uint64) (Block, error) {
	return l.a.allocBlock(l.here, n, 0, "AllocBlock")
}

// AllocTagged is Arena.AllocTagged on the Lane's shard.
func (l Lane) AllocTagged(n uint64, tag Tag) (Block, error) {
	return l.a.allocBlock(l.here, n, tag, "AllocTagged")
}

// Free is Arena.Free on the Lane's shard.
func (l Lane) Free(p DevicePtr) error { return l.a.queueFree(l.here, p, AnyEpoch) }

// FreeBlock is Arena.FreeBlock on the Lane's shard.
func (l Lane) FreeBlock(b Block) error { return l.a.queueFree(l.here, b.Ptr, b.Epoch) }

// Arena is the Lane's arena.
func (l Lane) Arena() *Arena { return l.a }
