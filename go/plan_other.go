//go:build !amd64

package zarena

import "sync/atomic"

// storeRel64 and storeRel32 store with (at least) release ordering: see plan_amd64.go.
func storeRel64(p *uint64, v uint64) { atomic.StoreUint64(p, v) }
func storeRel32(p *uint32, v uint32) { atomic.StoreUint32(p, v) }
