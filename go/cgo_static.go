//go:build cgo && zarena_static && !zarena_dlopen

package zarena

// Build tag zarena_static: libzarena.a (and the static CUDA runtime it was built with) is
// linked into the program, which then needs nothing of zarena at run time. cgo reads the
// link line from zarena-static.pc, installed beside zarena.pc.

// #cgo pkg-config: zarena-static
import "C"

// BuildMode: see cgo_shared.go.
const BuildMode = "static"
