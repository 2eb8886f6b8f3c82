package zarenatest_test

import (
	"errors"
	"os"
	"testing"
	"time"

	zarena "github.com/zarena/zarena/go"
	// Links the library into the test binary, so the zarena_dlopen build finds it loaded.
	_ "github.com/zarena/zarena/go/internal/cgotest"
	"github.com/zarena/zarena/go/zarenatest"
)

func TestMain(m *testing.M) {
	if os.Getenv("ZARENA_LOG_LEVEL") == "" {
		os.Setenv("ZARENA_LOG_LEVEL", "error") // the injected failures log warnings
	}
	os.Exit(m.Run())
}

// The delay holds the overflow allocation inside its cgo call; a closed arena and an
// arena off the host backend are refused.
func TestInjectOverflowFault(t *testing.T) {
	a, err := zarena.New(zarena.Config{Backend: zarena.BackendHost, CapacityBytes: 1 << 20,
		OverflowPolicy: zarena.OverflowSync, Name: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Alloc(768 << 10); err != nil {
		t.Fatal(err)
	}
	const delay = 50 * time.Millisecond
	if err := zarenatest.InjectOverflowFault(a, 0, 1, delay); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if _, err := a.Alloc(512 << 10); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(t0); took < delay {
		t.Fatalf("the overflow allocation took %v, less than the injected %v", took, delay)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zarenatest.InjectOverflowFault(a, 1, 0, 0); !errors.Is(err, zarena.ErrClosed) {
		t.Fatalf("on a closed arena: %v", err)
	}
}
