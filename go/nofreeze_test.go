//go:build !race

package zarena

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A C call that blocks must hold one thread, not the Go runtime: while an overflow
// allocation sleeps inside the library, a 1 ms ticker and a goroutine running the garbage
// collector in a loop keep going. Nothing here depends on how long anything takes: the
// allocation sleeps until the test ends its delay, which it does once the ticker has
// ticked 100 times and the collector run 10 times while the call was blocked. A runtime
// frozen by the call would never get there: the test would hang, and fail at the delay's
// backstop (or the test binary's timeout) with the counts it reached.
func TestNoFreezeDuringBlockingCCall(t *testing.T) {
	const (
		backstop  = 10 * time.Minute // only a frozen runtime gets near it
		wantTicks = 100
		wantGCs   = 10
	)
	// With a logger set, the log dispatcher waits in a blocking C call throughout: it
	// must not freeze anything either.
	rec := captureLogs(t, t.Name(), LevelWarn)
	a := newHost(t, Config{CapacityBytes: miB, OverflowPolicy: OverflowSync,
		OverflowSlow: time.Hour}) // keep the watchdog's record out of it
	if err := a.injectOverflowFault(0, 1, backstop); err != nil {
		t.Fatalf("InjectOverflowFault: %v", err)
	}
	mustAlloc(t, a, 768*kiB)

	var stop, entering, returned atomic.Bool
	var ticks, gcs atomic.Int64
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(time.Millisecond)
		defer tk.Stop()
		for !stop.Load() {
			<-tk.C
			ticks.Add(1)
		}
	}()
	go func() {
		defer wg.Done()
		for !stop.Load() {
			runtime.GC()
			gcs.Add(1)
		}
	}()

	callDone := make(chan struct{})
	go func() {
		defer close(callDone)
		entering.Store(true)
		p, err := a.Alloc(512 * kiB) // overflows: the injected delay runs in C
		returned.Store(true)
		if err != nil {
			t.Errorf("overflow Alloc: %v", err)
		}
		_ = a.Free(p)
	}()
	// Counted from the moment the call goes in (its Go side before C is a few calls).
	for !entering.Load() {
		runtime.Gosched()
	}
	t0, g0 := ticks.Load(), gcs.Load()
	for (ticks.Load()-t0 < wantTicks || gcs.Load()-g0 < wantGCs) && !returned.Load() {
		time.Sleep(time.Millisecond)
	}
	sleptThrough := !returned.Load()
	if err := a.endOverflowDelay(); err != nil {
		t.Fatalf("ending the delay: %v", err)
	}
	<-callDone
	stop.Store(true)
	wg.Wait()

	if !sleptThrough {
		t.Fatalf("the blocked call returned (after its %v backstop, or at once: the injected "+
			"delay did not happen) before the others ran: %d ticks, %d GCs while it was in C",
			backstop, ticks.Load()-t0, gcs.Load()-g0)
	}
	if _, ok := rec.find("arena.first_overflow"); !ok {
		t.Fatalf("the blocked overflow's record never reached the logger")
	}
	t.Logf("while the C call slept: %d ticks, %d GCs", ticks.Load()-t0, gcs.Load()-g0)
}
