//go:build cgo && !zarena_static && !zarena_dlopen

package zarena

// The default build mode: cgo finds the library with pkg-config (zarena.pc) and the
// program needs libzarena.so.1 at run time (through zarena.pc's rpath, the system's
// library path or LD_LIBRARY_PATH).

// #cgo pkg-config: zarena
import "C"

// BuildMode says how this package reaches the library: "shared" (linked against
// libzarena.so), "static" (tag zarena_static: libzarena.a inside the program) or
// "dlopen" (tag zarena_dlopen: loaded at run time).
const BuildMode = "shared"
