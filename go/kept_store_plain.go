//go:build cgo && gc && go1.23 && !go1.24 && amd64 && !zarena_portable && !race

package zarena

// storeOwned stores a tracked block's word (kept_index.go), under the lock of the shard that
// owns it: a release store, plain under runtime_fast.go's assumption 3 (other shards only
// load it, atomically). Race-detector builds use the atomic store (kept_store_atomic.go),
// which the detector understands.
func storeOwned(p *uint64, v uint64) { *p = v }
