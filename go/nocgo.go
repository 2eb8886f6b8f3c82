//go:build !cgo

package zarena

// Without cgo this package cannot reach the library in any build mode (even zarena_dlopen
// calls the library through cgo). Every other file of the package needs cgo, so this
// line is the only error the compiler reports: its text is the message.
var _ int = "zarena needs cgo: build with CGO_ENABLED=1 and a C compiler (the zarena_dlopen tag needs no libzarena at build time); code that must build without cgo should put its use of zarena behind its own build tag"
