//go:build cgo

package zarena

import _ "unsafe" // go:linkname

// procPin pins the calling goroutine to its P (no preemption until procUnpin) and returns
// the P's id; procUnpin undoes it. sync.Pool's own pinning: the runtime keeps both
// reachable by linkname (go.dev/issue/67401). Between them a goroutine must not block,
// yield or call C.
//
//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()
