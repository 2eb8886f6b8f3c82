//go:build cgo && !zarena_dlopen

package zarena

// The library is linked in (shared or static): it is there whenever the program runs.

// Available reports whether the library can be used: always nil when the package is
// linked against it (build modes "shared" and "static"); see the zarena_dlopen mode.
func Available() error { return nil }

// Load is for the zarena_dlopen mode (it loads the library from path); in the linked
// modes the library is already there and Load returns nil.
func Load(path string) error { return nil }

// ready is the check entry points make before their first C call; nothing to check here.
func ready() error { return nil }
