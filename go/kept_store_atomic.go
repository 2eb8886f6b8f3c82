//go:build cgo && !(gc && go1.23 && !go1.24 && amd64 && !zarena_portable && !race)

package zarena

import "sync/atomic"

// storeOwned stores a tracked block's word (kept_index.go) under its owner's lock: an atomic
// store wherever a plain one is not known to be a release store (kept_store_plain.go), and
// under the race detector.
func storeOwned(p *uint64, v uint64) { atomic.StoreUint64(p, v) }
