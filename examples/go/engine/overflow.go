package main

import (
	"fmt"
	"sync"

	zarena "github.com/zarena/zarena/go"
)

// memPool is the engine's own pool (ztensor's MemPool), here a second arena: the engine
// routes zarena's overflow to it through an OverflowAllocator.
type memPool struct {
	pool *zarena.Arena
	mu   sync.Mutex
	live map[zarena.DevicePtr]uint64
}

func (m *memPool) AllocOverflow(bytes, alignment uint64, stream uintptr) (zarena.DevicePtr, error) {
	b, err := m.pool.AllocBlock(bytes) // both arenas align to 256 bytes
	if err != nil {
		return 0, err
	}
	m.mu.Lock()
	m.live[b.Ptr] = bytes
	m.mu.Unlock()
	return b.Ptr, nil
}

func (m *memPool) FreeOverflow(p zarena.DevicePtr, bytes uint64, stream uintptr) {
	m.mu.Lock()
	delete(m.live, p)
	m.mu.Unlock()
	_ = m.pool.FreeNow(p, zarena.AnyEpoch)
}

func (m *memPool) liveBlocks() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.live)
}

// overflowRoute: the engine's pool takes zarena's overflow, the diagnosis is in the
// logger when Alloc returns (FlagDiagnoseSync), and the policy changes at run time while
// an overflow block lives: the block still goes back to the pool that made it.
func overflowRoute() error {
	fmt.Println("== 7. overflow into the engine's own pool; the policy changed at run time")
	var mu sync.Mutex
	var seen []zarena.Record
	if err := zarena.SetLogger(func(r zarena.Record) {
		mu.Lock()
		seen = append(seen, r)
		mu.Unlock()
	}, zarena.LevelInfo); err != nil {
		return err
	}
	defer zarena.SetLogger(nil, zarena.LevelFromEnv())
	firstOverflow := func() (zarena.Record, bool) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range seen {
			if r.Event == "arena.first_overflow" && r.Arena == "engine-ovf" {
				return r, true
			}
		}
		return zarena.Record{}, false
	}

	pool, err := zarena.New(zarena.Config{Backend: zarena.BackendHost, CapacityBytes: 1 << 20,
		OverflowPolicy: zarena.OverflowRefuse, Name: "engine-mempool"})
	if err != nil {
		return err
	}
	defer pool.Close()
	a, err := zarena.New(zarena.Config{Backend: zarena.BackendHost, CapacityBytes: 64 << 10,
		OverflowPolicy: zarena.OverflowSync, Name: "engine-ovf", Flags: zarena.FlagDiagnoseSync})
	if err != nil {
		return err
	}
	defer a.Close()
	mp := &memPool{pool: pool, live: map[zarena.DevicePtr]uint64{}}
	if err := a.SetOverflowAllocator(mp, "engine.MemPool"); err != nil {
		return err
	}
	if _, err := a.Alloc(64 << 10); err != nil { // the region, whole
		return err
	}
	b, err := a.AllocBlock(16 << 10) // overflows into the pool
	if err != nil {
		return err
	}
	rec, ok := firstOverflow() // no FlushLogs: the record is in already
	if !ok || b.Flags&zarena.BlockOverflow == 0 || mp.liveBlocks() != 1 {
		return fmt.Errorf("overflow into the pool: record %v, flags %v, pool blocks %d",
			ok, b.Flags, mp.liveBlocks())
	}
	path, _ := rec.Field("path")
	fmt.Printf("the overflow block came from %s; arena.first_overflow (path=%v) was in the "+
		"logger when Alloc returned\n", a.OverflowPolicy(), path)
	if err := a.SetOverflowPolicy(zarena.OverflowSync); err != nil {
		return err
	}
	if err := a.FreeBlock(b); err != nil {
		return err
	}
	if err := a.Reset(); err != nil { // applies the queued free
		return err
	}
	if n := mp.liveBlocks(); n != 0 {
		return fmt.Errorf("after the switch to sync the pool's block did not go back (%d live)", n)
	}
	fmt.Printf("policy now %s; the block made under custom went back to the pool\n",
		a.OverflowPolicy())
	return nil
}
