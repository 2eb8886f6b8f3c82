package zarena

import (
	"bytes"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zarena/zarena/go/internal/cgotest"
)

// goroutineID is the number in runtime.Stack's "goroutine N [" header; the tests use it
// only to tell the dispatcher from the goroutine that called Alloc.
func goroutineID() uint64 {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	buf = bytes.TrimPrefix(buf, []byte("goroutine "))
	if i := bytes.IndexByte(buf, ' '); i > 0 {
		buf = buf[:i]
	}
	id, _ := strconv.ParseUint(string(buf), 10, 64)
	return id
}

// calledFrom reports whether a function whose name ends with suffix is on the stack.
func calledFrom(suffix string) bool {
	pcs := make([]uintptr, 128)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, suffix) {
			return true
		}
		if !more {
			return false
		}
	}
}

// gate holds the dispatcher inside the logger: it creates an arena named name on
// another goroutine and waits until that arena's arena.config record is being
// delivered. release lets the dispatcher go on; the arena is closed by the cleanup.
type gate struct {
	name    string
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func newGate(name string) *gate {
	return &gate{name: name, entered: make(chan struct{}, 1), release: make(chan struct{})}
}

// catch is called by the test's logger first: it holds the gate's record until open,
// and reports whether r was that record.
func (g *gate) catch(r Record) bool {
	if r.Arena != g.name || r.Event != "arena.config" {
		return false
	}
	g.entered <- struct{}{}
	<-g.release
	return true
}

func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

// engage creates the gate's arena and returns once its record holds the logger.
func (g *gate) engage(t *testing.T) {
	t.Helper()
	created := make(chan *Arena, 1)
	go func() {
		a, err := New(Config{Backend: BackendHost, CapacityBytes: miB, Name: g.name})
		if err != nil {
			t.Errorf("New(%s): %v", g.name, err)
		}
		created <- a
	}()
	t.Cleanup(func() {
		g.open()
		if a := <-created; a != nil {
			a.Close()
		}
	})
	select {
	case <-g.entered:
	case <-time.After(10 * time.Second):
		t.Fatalf("the gate's record never reached the logger")
	}
}

// The hot path has no callback: a record that Alloc emits (the first overflow) is not
// delivered inside the Alloc call, nor on its goroutine, but later, by the dispatcher.
// With a logger called from the library's callback (the old design) it ran inside
// Alloc, on the allocating goroutine, below (*Arena).Alloc: all three checks fail.
func TestNoLogCallbackInsideAlloc(t *testing.T) {
	type delivery struct {
		event     string
		inAlloc   bool
		goroutine uint64
		fromAlloc bool
	}
	var (
		inAlloc atomic.Bool
		mu      sync.Mutex
		got     []delivery
	)
	g := newGate(t.Name() + "-gate")
	err := SetLogger(func(r Record) {
		if g.catch(r) || r.Arena != t.Name() {
			return
		}
		d := delivery{r.Event, inAlloc.Load(), goroutineID(), calledFrom("(*Arena).Alloc")}
		mu.Lock()
		got = append(got, d)
		mu.Unlock()
	}, LevelInfo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = SetLogger(nil, LevelFromEnv()) })
	t.Cleanup(g.open) // runs first: never leave the dispatcher held

	a := newHost(t, Config{CapacityBytes: miB, OverflowPolicy: OverflowSync})
	mustAlloc(t, a, 100*kiB)
	mustAlloc(t, a, 200*kiB)
	mustAlloc(t, a, 300*kiB)
	FlushLogs() // arena.config delivered; only Alloc's records are left to come
	// Hold the dispatcher, so that a correct design cannot deliver the record while
	// Alloc is still in C: a delivery flagged inAlloc is then always a callback.
	g.engage(t)

	allocG := goroutineID()
	inAlloc.Store(true)
	p, err := a.Alloc(600 * kiB) // overflows: logs arena.first_overflow inside the call
	inAlloc.Store(false)
	if err != nil {
		t.Fatalf("overflow Alloc: %v", err)
	}
	if s := mustStats(t, a); s.OverflowAllocs != 1 {
		t.Fatalf("the request did not overflow: %+v", s)
	}
	g.open()
	FlushLogs()
	if err := a.Free(p); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	var overflow *delivery
	for i := range got {
		d := &got[i]
		if d.event == "arena.first_overflow" {
			overflow = d
		}
		if d.inAlloc || d.fromAlloc || d.goroutine == allocG {
			t.Errorf("%s delivered inside a binding call: inside Alloc %v, Alloc on the "+
				"stack %v, on the test's goroutine %v", d.event, d.inAlloc, d.fromAlloc,
				d.goroutine == allocG)
		}
		if d.goroutine != got[0].goroutine {
			t.Errorf("records delivered on goroutines %d and %d, want one dispatcher",
				got[0].goroutine, d.goroutine)
		}
	}
	if overflow == nil {
		t.Fatalf("no arena.first_overflow delivered; got %+v", got)
	}
}

// Records arrive in the order they were emitted, the binding's own among them, and
// the records emitted before SetLogger replaces a logger go to the one replaced.
func TestLogOrderAndLoggerSwap(t *testing.T) {
	prefix := t.Name() + "-"
	var mu sync.Mutex
	var first, second []string
	logTo := func(dst *[]string) func(Record) {
		return func(r Record) {
			if strings.HasPrefix(r.Arena, prefix) {
				mu.Lock()
				*dst = append(*dst, r.Event+" "+r.Arena)
				mu.Unlock()
			}
		}
	}
	if err := SetLogger(logTo(&first), LevelInfo); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = SetLogger(nil, LevelFromEnv()) })
	const n = 20
	var want []string
	arenas := make([]*Arena, n)
	for i := range arenas {
		name := fmt.Sprintf("%s%02d", prefix, i)
		a, err := New(Config{Backend: BackendHost, CapacityBytes: miB, Name: name})
		if err != nil {
			t.Fatal(err)
		}
		arenas[i] = a
		want = append(want, "arena.config "+name)
	}
	// The finalizer's path: a record the binding emits queues behind the library's.
	emitGo(Record{Level: LevelWarn, Event: "go.test", Arena: prefix + "go"})
	want = append(want, "go.test "+prefix+"go")
	if err := SetLogger(logTo(&second), LevelInfo); err != nil {
		t.Fatal(err)
	}
	for i, a := range arenas {
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		// Close waits for the arena's last record.
		mu.Lock()
		last := ""
		if len(second) > 0 {
			last = second[len(second)-1]
		}
		mu.Unlock()
		if w := fmt.Sprintf("arena.destroy %s%02d", prefix, i); last != w {
			t.Fatalf("after Close the last record is %q, want %q", last, w)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(first, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the first logger got\n%s\nwant\n%s", strings.Join(first, "\n"),
			strings.Join(want, "\n"))
	}
	if len(second) != n {
		t.Fatalf("the second logger got %d records, want the %d arena.destroy: %v", len(second),
			n, second)
	}
}

// A logger that falls behind loses the newest records, not the program's time: the
// library's threads never wait for Go. The loss is counted and reported in place.
func TestLogQueueDropsWhenFullAndSaysSo(t *testing.T) {
	const capacity = 4
	name := t.Name()
	var mu sync.Mutex
	var named, dropNotes []Record
	g := newGate(name + "-gate")
	err := SetLogger(func(r Record) {
		if g.catch(r) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.Event == "go.log_dropped":
			dropNotes = append(dropNotes, r)
		case r.Arena == name:
			named = append(named, r)
		}
	}, LevelInfo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = SetLogger(nil, LevelFromEnv()) })
	t.Cleanup(g.open)

	prev := setLogQueueCapacity(capacity)
	t.Cleanup(func() { setLogQueueCapacity(prev) })
	g.engage(t)
	droppedBefore := LogsDropped()
	// Each thread logs arena.config, arena.first_overflow and arena.destroy at least.
	const threads, atLeast = 4, 3 * 4
	start := time.Now()
	if st := cgotest.OnForeignThreads(name, miB, threads); st != 0 {
		t.Fatalf("status %d", st)
	}
	elapsed := time.Since(start)
	g.open()
	FlushLogs()

	dropped := LogsDropped() - droppedBefore
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d threads with the logger held: %d records queued, %d dropped, in %v", threads,
		len(named), dropped, elapsed.Round(time.Microsecond))
	if len(named) != capacity || dropped < atLeast-capacity {
		t.Fatalf("%d records delivered and %d dropped, want %d delivered (the queue's "+
			"capacity) and at least %d dropped", len(named), dropped, capacity, atLeast-capacity)
	}
	var noted uint64
	for _, r := range dropNotes {
		v, _ := r.Field("dropped")
		n, ok := v.(uint64)
		if !ok || n == 0 || r.Level != LevelWarn || !strings.Contains(r.Message, "dropped") {
			t.Fatalf("bad go.log_dropped record: %+v", r)
		}
		noted += n
	}
	if noted != dropped {
		t.Fatalf("go.log_dropped records account for %d of %d drops", noted, dropped)
	}
}

func TestFlushLogsWithoutLogger(t *testing.T) {
	if err := SetLogger(nil, LevelFromEnv()); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { FlushLogs(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("FlushLogs waited with no logger set")
	}
}
