package zarena

import (
	"runtime"
	"strings"
	"testing"
)

// The planned path's build is the fast one exactly where its assumptions were verified (Go
// 1.23, gc, amd64) and the zarena_portable tag does not force the portable one; the plan
// tests then run through whichever it is (scripts/go-test.sh runs them in both).
func TestRuntimeAssumptions(t *testing.T) {
	want := "portable"
	if !portableForced && runtime.Compiler == "gc" && runtime.GOARCH == "amd64" &&
		strings.HasPrefix(runtime.Version(), "go1.23") {
		want = "fast"
	}
	if !strings.HasPrefix(runtimeAssumptions, want+":") {
		t.Fatalf("%s on %s/%s (tag zarena_portable: %v) built the planned path %q, want %s",
			runtime.Version(), runtime.GOOS, runtime.GOARCH, portableForced, runtimeAssumptions, want)
	}
	t.Logf("%s: %s", runtime.Version(), runtimeAssumptions)
}
