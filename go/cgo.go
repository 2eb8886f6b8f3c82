package zarena

// The flags apply to every cgo file of the package.

// #cgo pkg-config: zarena
// #cgo LDFLAGS: -lpthread
import "C"
