package zarena

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zarena/zarena/go/internal/cgotest"
)

// overflowOnce makes a SYNC host arena overflow once and returns the request size.
func overflowOnce(t *testing.T, a *Arena) uint64 {
	t.Helper()
	mustAlloc(t, a, 100*kiB)
	mustAlloc(t, a, 200*kiB)
	mustAlloc(t, a, 300*kiB)
	const req = 600 * kiB
	p := mustAlloc(t, a, req)
	if s := mustStats(t, a); s.OverflowAllocs != 1 {
		t.Fatalf("request did not overflow: %+v", s)
	}
	if err := a.FreeNow(p, AnyEpoch); err != nil {
		t.Fatal(err)
	}
	return req
}

func TestLoggerReceivesFirstOverflowWithTypedFields(t *testing.T) {
	rec := captureLogs(t, t.Name(), LevelTrace)
	a := newHost(t, Config{CapacityBytes: miB, OverflowPolicy: OverflowSync})
	if _, ok := rec.find("arena.config"); !ok {
		t.Fatalf("no arena.config record at create")
	}
	req := overflowOnce(t, a)
	r, ok := rec.find("arena.first_overflow")
	if !ok {
		t.Fatalf("no arena.first_overflow record; got %d records", len(rec.recs))
	}
	if r.Level != LevelWarn || r.Arena != t.Name() || r.Message == "" || r.Time.IsZero() {
		t.Fatalf("record header: %+v", r)
	}
	for _, key := range []string{"requested_bytes", "aligned_bytes", "capacity_bytes",
		"offset_bytes", "epoch_allocs", "epoch_max_alloc_bytes", "hits", "misses", "reuses",
		"resets", "free_list_len"} {
		v, ok := r.Field(key)
		if !ok {
			t.Fatalf("field %s missing", key)
		}
		if _, isUint := v.(uint64); !isUint {
			t.Fatalf("field %s is %T, want uint64", key, v)
		}
	}
	for _, key := range []string{"path", "verdict", "advice"} {
		v, _ := r.Field(key)
		if s, isStr := v.(string); !isStr || s == "" {
			t.Fatalf("field %s = %#v, want a non-empty string", key, v)
		}
	}
	if v, _ := r.Field("requested_bytes"); v != uint64(req) {
		t.Fatalf("requested_bytes = %v, want %d", v, req)
	}
	if v, _ := r.Field("capacity_bytes"); v != uint64(miB) {
		t.Fatalf("capacity_bytes = %v", v)
	}
	if v, _ := r.Field("path"); v != "sync" {
		t.Fatalf("path = %v", v)
	}
	if _, ok := r.Field("no_such_field"); ok {
		t.Fatalf("Field found a missing key")
	}
	if s := r.String(); !strings.Contains(s, "arena.first_overflow") || !strings.Contains(s, "requested_bytes=614400") {
		t.Fatalf("String() = %q", s)
	}
	// Once per epoch only.
	overflowOnceMore := mustAlloc(t, a, 600*kiB)
	_ = a.Free(overflowOnceMore)
	if n := rec.count("arena.first_overflow"); n != 1 {
		t.Fatalf("%d first_overflow records in one epoch", n)
	}
}

func TestLoggerMinLevelAndRestore(t *testing.T) {
	rec := captureLogs(t, t.Name(), LevelWarn)
	a := newHost(t, Config{CapacityBytes: miB})
	if _, ok := rec.find("arena.config"); ok {
		t.Fatalf("info record delivered below the minimum level")
	}
	_ = a
	if err := SetLogger(nil, LevelFromEnv()); err != nil {
		t.Fatal(err)
	}
	b := newHost(t, Config{CapacityBytes: miB, Name: t.Name()})
	overflowOnce(t, b)
	if n := len(rec.recs); n != 0 {
		t.Fatalf("%d records reached a logger that was removed", n)
	}
}

func TestLoggerOnThreadsGoDidNotCreate(t *testing.T) {
	const name = "foreign-thread"
	rec := captureLogs(t, name, LevelInfo)
	if st := cgotest.OnForeignThreads(name, miB, 4); st != 0 {
		t.Fatalf("foreign threads failed with status %d", st)
	}
	for _, ev := range []string{"arena.config", "arena.first_overflow", "arena.destroy"} {
		if n := rec.count(ev); n != 4 {
			t.Fatalf("%d %s records from 4 foreign threads, want 4", n, ev)
		}
	}
}

func TestPanickingLoggerIsRecovered(t *testing.T) {
	before := LoggerPanics()
	var delivered sync.WaitGroup
	calls := 0
	var mu sync.Mutex
	captureLogs(t, "", LevelInfo)
	// The reports of the panics are part of the check, not of the run's output.
	reports := &lockedWriter{w: &bytes.Buffer{}, mu: &sync.Mutex{}}
	loggerPanicOut.Store(writerBox{reports})
	defer loggerPanicOut.Store(writerBox{os.Stderr})
	err := SetLogger(func(r Record) {
		if r.Arena != t.Name() && r.Arena != "foreign-panic" {
			return
		}
		mu.Lock()
		calls++
		mu.Unlock()
		panic("logger bug")
	}, LevelInfo)
	if err != nil {
		t.Fatal(err)
	}
	delivered.Add(1)
	go func() { // on a Go thread ...
		defer delivered.Done()
		a, err := New(Config{Backend: BackendHost, CapacityBytes: miB, Name: t.Name()})
		if err != nil {
			t.Errorf("New: %v", err)
			return
		}
		a.Close()
	}()
	delivered.Wait()
	// ... and on threads Go did not create.
	if st := cgotest.OnForeignThreads("foreign-panic", miB, 2); st != 0 {
		t.Fatalf("status %d", st)
	}
	FlushLogs()
	mu.Lock()
	defer mu.Unlock()
	if calls < 2+2*3 {
		t.Fatalf("logger called %d times", calls)
	}
	if got := LoggerPanics() - before; got != uint64(calls) {
		t.Fatalf("%d panics counted for %d calls", got, calls)
	}
	reports.mu.Lock()
	text := reports.w.String()
	reports.mu.Unlock()
	if n := strings.Count(text, "the Go log callback panicked (logger bug); record lost: "); n != calls {
		t.Fatalf("%d panic reports for %d panics:\n%s", n, calls, text)
	}
}

func TestSlogHandlerBridge(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	h := slog.NewJSONHandler(&lockedWriter{w: &buf, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelWarn})
	fn, lowest := SlogLogger(h)
	if lowest != LevelWarn {
		t.Fatalf("SlogLogger: lowest level %v, want warn (the handler's)", lowest)
	}
	if err := SetLogger(fn, lowest); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = SetLogger(nil, LevelFromEnv()) })
	a := newHost(t, Config{CapacityBytes: miB, OverflowPolicy: OverflowSync})
	overflowOnce(t, a)
	FlushLogs()
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	var found map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("bad JSON %q: %v", line, err)
		}
		if m["arena"] != t.Name() {
			continue
		}
		if m["event"] == "arena.config" {
			t.Fatalf("an info record passed a warn handler: %s", line)
		}
		if m["event"] == "arena.first_overflow" {
			found = m
		}
	}
	if found == nil {
		t.Fatalf("no first_overflow in slog output:\n%s", out)
	}
	if found["level"] != "WARN" || found["msg"] == "" {
		t.Fatalf("level/msg: %v", found)
	}
	if n, ok := found["requested_bytes"].(float64); !ok || n != 600*kiB {
		t.Fatalf("requested_bytes = %#v, want the number %d", found["requested_bytes"], 600*kiB)
	}
	if v, ok := found["verdict"].(string); !ok || v == "" {
		t.Fatalf("verdict = %#v", found["verdict"])
	}
}

func TestSlogAttrsKeepTypes(t *testing.T) {
	r := Record{Event: "e", Arena: "x", Fields: []Field{{"i", int64(-1)}, {"u", uint64(1 << 63)},
		{"f", 0.5}, {"b", true}, {"s", "str"}, {"o", []int{1}}}}
	want := map[string]slog.Kind{"event": slog.KindString, "arena": slog.KindString,
		"i": slog.KindInt64, "u": slog.KindUint64, "f": slog.KindFloat64, "b": slog.KindBool,
		"s": slog.KindString, "o": slog.KindAny}
	attrs := r.Attrs()
	if len(attrs) != len(want) {
		t.Fatalf("%d attrs", len(attrs))
	}
	for _, a := range attrs {
		if a.Value.Kind() != want[a.Key] {
			t.Errorf("%s: kind %v, want %v", a.Key, a.Value.Kind(), want[a.Key])
		}
	}
	levels := map[Level]slog.Level{LevelTrace: slog.LevelDebug - 4, LevelDebug: slog.LevelDebug,
		LevelInfo: slog.LevelInfo, LevelWarn: slog.LevelWarn, LevelError: slog.LevelError}
	for l, s := range levels {
		if l.SlogLevel() != s {
			t.Errorf("%v -> %v, want %v", l, l.SlogLevel(), s)
		}
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestFinalizerReportsLeak(t *testing.T) {
	const name = "leaked-arena"
	rec := captureLogs(t, name, LevelInfo)
	func() {
		a, err := New(Config{Backend: BackendHost, CapacityBytes: miB, Name: name})
		if err != nil {
			t.Fatal(err)
		}
		mustAlloc(t, a, kiB)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		runtime.GC()
		if rec.count("arena.destroy") == 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	leak, ok := rec.find("go.arena_leak")
	if !ok || leak.Level != LevelWarn || !strings.Contains(leak.Message, "without Close") {
		t.Fatalf("no leak record (got %+v)", rec.recs)
	}
	if rec.count("arena.destroy") != 1 {
		t.Fatalf("the finalizer did not destroy the arena")
	}
}
