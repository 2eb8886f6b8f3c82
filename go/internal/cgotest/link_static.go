//go:build zarena_static

package cgotest

// With the zarena_static tag the helpers link libzarena.a too, so a test binary built
// with the tag needs no libzarena.so at run time.

// #cgo pkg-config: zarena-static
import "C"
