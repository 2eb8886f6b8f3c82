package main

import (
	"fmt"
	"log"
	"log/slog"
	"os"

	zarena "github.com/zarena/zarena/go"
)

func main() {
	zarena.SetLogger(zarena.SlogLogger(slog.NewTextHandler(os.Stderr, nil))) // diagnostics via slog
	a, err := zarena.New(zarena.Config{CapacityBytes: 256 << 20})
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	if _, err := a.Alloc(64 << 20); err != nil { // weights: below the step boundary
		log.Fatal(err)
	}
	a.MarkStepBoundary()
	for step := 0; step < 100; step++ {
		err := a.Step(func() error { // resets the arena after the step
			act, err := a.Alloc(8 << 20)
			if err != nil {
				return err
			}
			return a.Free(act)
		})
		if err != nil {
			log.Fatal(err)
		}
	}
	s, err := a.Stats()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("epoch %d, high water %d bytes\n", a.Epoch(), s.HighWaterBytes)
}
