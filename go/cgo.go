//go:build cgo

package zarena

// Flags for every cgo file of the package, in every build mode. How the library is
// found is the build mode's file: cgo_shared.go (default: pkg-config zarena, libzarena.so
// at run time), cgo_static.go (tag zarena_static: libzarena.a linked in) or cgo_dlopen.go
// (tag zarena_dlopen: nothing at build time, dlopen at run time).

// #cgo LDFLAGS: -lpthread
import "C"
