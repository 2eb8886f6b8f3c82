package zarena

/*
#include "shim.h"
*/
import "C"

import (
	"runtime"
	"sync"
	"unsafe"
)

// arenaTable maps the library's arena ids (zarena_arena_id) to the *Arena that owns each
// one, for Record.Handle. It must not keep an arena alive: an arena the program forgot
// to Close is found by its finalizer (leaked). So it holds the address, not a pointer.
// That is safe because an entry lives exactly while the object cannot be freed: it is
// added in New, before the finalizer is set, and removed by Close (which then keeps the
// object alive until the removal) or by the finalizer itself, and an object with a
// finalizer is never freed before its finalizer ran. Lookups take the lock, so none
// overlaps a removal.
type arenaTable struct {
	mu       sync.Mutex
	byID     map[uint64]uintptr
	creating int        // New calls between the library's create and their add
	created  *sync.Cond // signalled when creating drops
}

var arenas = func() *arenaTable {
	t := &arenaTable{byID: map[uint64]uintptr{}}
	t.created = sync.NewCond(&t.mu)
	return t
}()

// beginCreate precedes the library's create: the records of the create (arena.config)
// may reach the dispatcher before the arena is added, and lookup waits for it.
func (t *arenaTable) beginCreate() {
	t.mu.Lock()
	t.creating++
	t.mu.Unlock()
}

// endCreate follows it: a is the new arena, or nil when the create failed. It never
// waits, so a failing New may wait for its records next.
func (t *arenaTable) endCreate(a *Arena) {
	t.mu.Lock()
	if a != nil && a.id != 0 {
		t.byID[a.id] = uintptr(unsafe.Pointer(a))
	}
	t.creating--
	t.created.Broadcast()
	t.mu.Unlock()
}

// forget removes a's entry: from Close (after the records of the destroy were delivered)
// and from the finalizer.
func (t *arenaTable) forget(a *Arena) {
	t.mu.Lock()
	delete(t.byID, a.id)
	t.mu.Unlock()
	runtime.KeepAlive(a) // in the table until here
}

// lookup is the *Arena of id, nil for 0 or an arena no longer (or never) in the table. A
// record of an arena being created (arena.config, delivered while New has not returned)
// waits for it; New never waits for a lookup.
func (t *arenaTable) lookup(id uint64) *Arena {
	if id == 0 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for {
		if p, ok := t.byID[id]; ok {
			return *(*(*Arena))(unsafe.Pointer(&p))
		}
		if t.creating == 0 {
			return nil
		}
		t.created.Wait()
	}
}

// ID is the arena's identity in log records (Record.ArenaID, zarena_arena_id): unique in
// the process, never reused.
func (a *Arena) ID() uint64 { return a.id }

// arenaID asks the library for the id of a new arena's handle.
func arenaID(h C.uintptr_t) uint64 { return uint64(C.shim_arena_id(h)) }
