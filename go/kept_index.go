//go:build cgo

package zarena

import "sync/atomic"

// The index of tracked blocks (lane_cache.go): every block a Lane's crossing handed out
// that may be kept, keyed by address, with one word: its state, the shard that owns it,
// its class.
//
// Who writes a word: a block's word changes only under the lock of the shard it names as
// owner (a pop, a free, a give-back), or with every shard locked; so those writes need no
// read-modify-write: two frees of one block meet on the owner's lock, and the second sees
// the first's store. Anyone may read a word (to find the owner) with an atomic load, then
// takes the owner's lock and reads it again. The owner changes only when the slot is
// filled again for a new block (a crossing hands the address out anew, under the new
// owner's lock), which a reader that re-reads under the lock notices. Slots are claimed by
// compare-and-swap on the key (two shards may insert different blocks at once), and are
// never emptied until the whole index is cleared (a reset, a pin) or rebuilt (growKept),
// with every shard locked; a block given back leaves its slot as a tombstone (gone).
//
// The slots are Go memory: a free that found a block's owner in a table that a rebuild, a
// clear or Close has since replaced still reads valid memory, and then sees, under the
// owner's lock, that the table changed. Loads are atomic; a word's stores, always under its
// owner's lock (or every lock), are release stores (storeOwned: plain where
// runtime_fast.go's assumption 3 holds and the race detector is off).
const (
	keptOut  = 1 // handed to the caller
	keptHeld = 2 // kept by its owner shard
	keptGone = 3 // given back to the library (the slot stays, a tombstone)

	keptStateMask  = 3
	keptOwnerShift = 2
	keptOwnerBits  = 16 // an arena with more shards keeps nothing (initKept)
	keptClassShift = keptOwnerShift + keptOwnerBits
)

func keptWord(state uint64, owner uint32, cls uint64) uint64 {
	return state | uint64(owner)<<keptOwnerShift | cls<<keptClassShift
}

func keptOwner(w uint64) uint32 { return uint32(w>>keptOwnerShift) & (1<<keptOwnerBits - 1) }

type keptSlot struct {
	key  uint64 // the block's address; 0: empty
	word uint64 // atomic loads; stores under the owner's lock: storeOwned (kept_store_*.go)
}

// keptTable is one generation of the index's slots (a power of two of them). Frees find a
// block's owner without a lock: one that read a table a rebuild replaced sees, under the
// owner's lock, that the table changed, and looks again.
type keptTable struct {
	slots []keptSlot
	mask  uintptr
	shift uint // log2 of the alignment: a block's address >> shift hashes it
}

type keptIndex struct {
	tab      atomic.Pointer[keptTable] // nil until the first Lane
	shift    uint
	used     atomic.Int64 // slots with a key, in tab
	wantGrow atomic.Bool  // an insert found the index full: rebuild at the next chance
	atMax    atomic.Bool  // the largest table is full of live entries: no rebuild until a clear
}

func (t *keptTable) home(p uintptr) uintptr {
	return uintptr((uint64(p>>(t.shift&63))*0x9E3779B97F4A7C15)>>32) & t.mask
}

// find returns the slot of p and its word, when p is tracked as out or kept.
func (t *keptTable) find(p uintptr) (uintptr, uint64, bool) {
	for i := t.home(p); ; i = (i + 1) & t.mask {
		switch k := uintptr(atomic.LoadUint64(&t.slots[i].key)); k {
		case p:
			w := atomic.LoadUint64(&t.slots[i].word)
			s := w & keptStateMask
			return i, w, s == keptOut || s == keptHeld
		case 0:
			return 0, 0, false
		}
	}
}

// find is the current table's find (false with no table).
func (x *keptIndex) find(p uintptr) (*keptTable, uintptr, uint64, bool) {
	t := x.tab.Load()
	if t == nil {
		return nil, 0, 0, false
	}
	i, w, ok := t.find(p)
	return t, i, w, ok
}

// insert tracks p as out, owned by shard owner (locked by the caller; p was just handed out
// by the library: no one else holds it), of class cls. When the index is too full to take
// it, p stays untracked (its free goes to the library) and the index asks to grow.
func (x *keptIndex) insert(p uintptr, owner uint32, cls uint64) {
	t := x.tab.Load()
	if t == nil || x.used.Load()+1 > int64(len(t.slots))*3/4 {
		if !x.atMax.Load() {
			x.wantGrow.Store(true)
		}
		return
	}
	w := keptWord(keptOut, owner, cls)
	for i := t.home(p); ; i = (i + 1) & t.mask {
		k := uintptr(atomic.LoadUint64(&t.slots[i].key))
		if k == 0 {
			if atomic.CompareAndSwapUint64(&t.slots[i].key, 0, uint64(p)) {
				x.used.Add(1)
				k = p
			} else {
				k = uintptr(atomic.LoadUint64(&t.slots[i].key)) // another shard took it
			}
		}
		if k == p { // a new slot, or p's tombstone (the library gave p out again)
			storeOwned(&t.slots[i].word, w)
			return
		}
	}
}

// forgetLocked marks p gone (every shard locked).
func (x *keptIndex) forgetLocked(p uintptr) {
	if t, slot, _, ok := x.find(p); ok {
		storeOwned(&t.slots[slot].word, keptGone)
	}
}

// clearLocked forgets every block (every shard locked; none kept): a new empty table of the
// same size (the next step tracks as many blocks as this one did). A reader without a lock
// that looked in the old one sees, once it holds the owner's lock, that the table changed.
func (x *keptIndex) clearLocked() {
	if t := x.tab.Load(); t != nil && x.used.Load() != 0 {
		x.tab.Store(x.newTable(len(t.slots)))
		x.used.Store(0)
	}
	x.atMax.Store(false)
}

func (x *keptIndex) newTable(n int) *keptTable {
	return &keptTable{slots: make([]keptSlot, n), mask: uintptr(n - 1), shift: x.shift}
}

// release drops the index (every shard locked, the arena destroyed).
func (x *keptIndex) release() {
	x.tab.Store(nil)
	x.used.Store(0)
}

// rebuildLocked makes the index anew, large enough for its live entries four times over (up
// to keptIndexMax slots) and without tombstones (every shard locked; the caller finds the
// kept blocks' slots again). false: the largest table is half full of live entries already;
// nothing changed (blocks beyond it stay untracked until the next reset clears it).
func (x *keptIndex) rebuildLocked() bool {
	old := x.tab.Load()
	live := 0
	if old != nil {
		for i := range old.slots {
			if s := atomic.LoadUint64(&old.slots[i].word) & keptStateMask; s == keptOut || s == keptHeld {
				live++
			}
		}
	}
	n := keptIndexMin
	for n < 4*live && n < keptIndexMax {
		n *= 2
	}
	if old != nil && len(old.slots) == keptIndexMax && 2*live >= keptIndexMax {
		x.atMax.Store(true)
		return false
	}
	t := x.newTable(n)
	used := int64(0)
	if old != nil {
		for i := range old.slots {
			w := atomic.LoadUint64(&old.slots[i].word)
			if s := w & keptStateMask; s != keptOut && s != keptHeld {
				continue
			}
			p := uintptr(atomic.LoadUint64(&old.slots[i].key))
			j := t.home(p)
			for t.slots[j].key != 0 { // t is not published yet
				j = (j + 1) & t.mask
			}
			t.slots[j] = keptSlot{key: uint64(p), word: w}
			used++
		}
	}
	x.used.Store(used)
	x.tab.Store(t)
	return true
}
