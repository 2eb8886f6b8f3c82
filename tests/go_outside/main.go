// Command go_outside is a program in a module of its own, outside the zarena repository,
// as a user's engine would be: scripts/go-outside-test.sh copies it into a temporary
// module that requires github.com/zarena/zarena/go (README, "Go from another module")
// and builds it in each build mode against an installed prefix.
//
// It exits 3, printing why, when the library is not available (the zarena_dlopen mode
// without libzarena), so an engine's fallback path can be checked; 0 after a round of
// allocations otherwise.
package main

import (
	"errors"
	"fmt"
	"os"

	zarena "github.com/zarena/zarena/go"
)

func main() {
	if err := zarena.Available(); err != nil {
		fmt.Printf("zarena unavailable (build mode %s, ErrNotLoaded %v): %v\n", zarena.BuildMode,
			errors.Is(err, zarena.ErrNotLoaded), err)
		os.Exit(3)
	}
	a, err := zarena.New(zarena.Config{Backend: zarena.BackendHost, CapacityBytes: 1 << 20,
		Name: "outside"})
	if err != nil {
		fmt.Println("New:", err)
		os.Exit(1)
	}
	defer a.Close()
	b, err := a.AllocBlock(1000)
	if err != nil {
		fmt.Println("AllocBlock:", err)
		os.Exit(1)
	}
	if err := a.FreeBlock(b); err != nil {
		fmt.Println("FreeBlock:", err)
		os.Exit(1)
	}
	if err := a.Reset(); err != nil {
		fmt.Println("Reset:", err)
		os.Exit(1)
	}
	s, err := a.Stats()
	if err != nil {
		fmt.Println("Stats:", err)
		os.Exit(1)
	}
	v, _ := zarena.Version()
	fmt.Printf("ok: zarena %s, build mode %s, epoch %d, live %d\n", v, zarena.BuildMode,
		a.Epoch(), s.LiveAllocs)
}
