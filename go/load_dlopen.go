//go:build cgo && zarena_dlopen

package zarena

/*
#include <stdlib.h>
#include "dlopen.h"

typedef struct {
  int ok;
  const char* err;
  int err_owned;
  const char* from;
} shim_load_result;

static inline shim_load_result shim_load(const char* path) {
  shim_load_result r;
  r.ok = zarena_go_dl_load(path, &r.err, &r.err_owned, &r.from);
  return r;
}
*/
import "C"

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

// loader holds the outcome of loading the library: it is loaded at most once per
// process; a failed attempt is remembered until Load is called with a path.
var loader struct {
	mu     sync.Mutex
	loaded atomic.Bool
	tried  bool
	err    error
	from   string
}

// Available loads the library if that was not tried yet and reports whether it can be
// used: nil, or an *Error with StatusUnsupported whose message names what was tried and
// why it failed (unwraps to ErrNotLoaded too). It looks at $ZARENA_LIBRARY (a path),
// else "libzarena.so.1" through the dynamic loader's search path (LD_LIBRARY_PATH,
// ldconfig's cache). Call it once at start-up to decide whether to fall back; every
// entry point also checks it and fails with the same error.
func Available() error {
	if loader.loaded.Load() {
		return nil
	}
	loader.mu.Lock()
	defer loader.mu.Unlock()
	if !loader.tried {
		loader.err = loadLocked("")
		loader.tried = true
	}
	return loader.err
}

// Load loads the library from path (a file name or path as dlopen takes it) instead of
// the default places. It returns nil when a library is loaded already (by an earlier
// Load or Available), whatever path says: one library per process.
func Load(path string) error {
	if loader.loaded.Load() {
		return nil
	}
	loader.mu.Lock()
	defer loader.mu.Unlock()
	loader.err = loadLocked(path)
	loader.tried = true
	return loader.err
}

// LoadedFrom is the name the library was loaded from ("" until it was).
func LoadedFrom() string {
	loader.mu.Lock()
	defer loader.mu.Unlock()
	return loader.from
}

func loadLocked(path string) error {
	var cpath *C.char
	if path != "" {
		cpath = C.CString(path)
		defer C.free(unsafe.Pointer(cpath))
	}
	r := C.shim_load(cpath)
	if r.ok != 0 {
		loader.from = C.GoString(r.from)
		loader.loaded.Store(true)
		return nil
	}
	msg := "library not loaded"
	if r.err != nil {
		msg = "library not loaded: " + C.GoString(r.err)
		if r.err_owned != 0 {
			C.free(unsafe.Pointer(r.err))
		}
	}
	return &Error{Status: StatusUnsupported, Message: msg + " (set ZARENA_LIBRARY to " +
		"libzarena.so.1's path, or install zarena; this program was built with the " +
		"zarena_dlopen tag)", also: ErrNotLoaded}
}

func ready() error {
	if loader.loaded.Load() {
		return nil
	}
	return Available()
}
