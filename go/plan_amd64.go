//go:build amd64

package zarena

// storeRel64 and storeRel32 store with release ordering (zarena_plan.h's "atomic store,
// release"). On amd64 every store is a release (TSO): C's __atomic_store_n with
// __ATOMIC_RELEASE is a plain move there, and so is this; sync/atomic's stores add a locked
// exchange (a full barrier) that the protocol does not ask for, at about a tenth of a
// planned alloc+free pair each. The addresses are C memory, which the race detector does
// not watch; the compiler keeps stores in program order.
func storeRel64(p *uint64, v uint64) { *p = v }
func storeRel32(p *uint32, v uint32) { *p = v }
