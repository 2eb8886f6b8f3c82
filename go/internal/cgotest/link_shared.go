//go:build !zarena_static

package cgotest

// The helpers call the library directly: linked against libzarena.so (also in the
// binding's zarena_dlopen mode, whose dlopen then finds the library already loaded).

// #cgo pkg-config: zarena
import "C"
