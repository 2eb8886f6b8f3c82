package zarenatest_test

import (
	"errors"
	"fmt"

	zarena "github.com/zarena/zarena/go"
	"github.com/zarena/zarena/go/zarenatest"
)

// An engine's fallback for a GPU allocation that fails, tested on a machine without one.
func ExampleInjectOverflowFault() {
	a, err := zarena.New(zarena.Config{Backend: zarena.BackendHost, CapacityBytes: 1 << 20,
		OverflowPolicy: zarena.OverflowSync, Name: "zarenatest-example"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()
	if _, err := a.Alloc(768 << 10); err != nil { // most of the region
		fmt.Println(err)
		return
	}
	// The next overflow allocation fails as the backend would; none is delayed.
	if err := zarenatest.InjectOverflowFault(a, 1, 0, 0); err != nil {
		fmt.Println(err)
		return
	}
	_, err = a.Alloc(512 << 10) // does not fit: overflows, and fails
	fmt.Println(errors.Is(err, zarena.ErrBackend))
	p, err := a.Alloc(512 << 10) // the next overflow is served
	fmt.Println(p != 0, err)
	// Output:
	// true
	// true <nil>
}
