//go:build zarena_dlopen

package zarena

import (
	"os"
	"strings"
	"testing"
)

// In the dlopen mode the library came from dlopen: LoadedFrom names it, and a later Load
// keeps the library already loaded.
func TestDlopenLoaded(t *testing.T) {
	if BuildMode != "dlopen" {
		t.Fatalf("BuildMode %q", BuildMode)
	}
	if err := Available(); err != nil {
		t.Fatal(err)
	}
	want := "libzarena.so.1"
	if env := os.Getenv("ZARENA_LIBRARY"); env != "" {
		want = env
	}
	if got := LoadedFrom(); !strings.HasSuffix(got, want) {
		t.Fatalf("LoadedFrom() = %q, want %q", got, want)
	}
	if err := Load("/nonexistent/libzarena.so.1"); err != nil {
		t.Fatalf("Load after the library was loaded: %v", err)
	}
}
