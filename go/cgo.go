package zarena

// The flags apply to every cgo file of the package.

// #cgo pkg-config: zarena
import "C"
