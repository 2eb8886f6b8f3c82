//go:build cgo && zarena_dlopen

package zarena

// Build tag zarena_dlopen: the package builds without libzarena (neither pkg-config nor
// the library are needed; the header is the copy in internal/include) and loads
// libzarena.so.1 at run time with dlopen (dlopen.c). Available says whether that worked.

// #cgo CFLAGS: -DZARENA_GO_DLOPEN -I${SRCDIR}/internal/include
// #cgo LDFLAGS: -ldl
import "C"

// BuildMode: see cgo_shared.go.
const BuildMode = "dlopen"
