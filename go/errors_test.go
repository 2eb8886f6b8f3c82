package zarena

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// expectStatus checks that err is an *Error of the status, matches its sentinel and
// no other, and carries the library's message.
func expectStatus(t *testing.T, err error, want error, msgPart string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error %v is not %v", err, want)
	}
	for _, other := range sentinels[1:] {
		if other != want && errors.Is(err, other) {
			t.Fatalf("error %v also matches %v", err, other)
		}
	}
	var ze *Error
	if !errors.As(err, &ze) {
		t.Fatalf("error %v is not a *zarena.Error", err)
	}
	if ze.Message == "" || !strings.Contains(ze.Message, msgPart) {
		t.Fatalf("message %q does not contain %q", ze.Message, msgPart)
	}
	if StatusOf(fmt.Errorf("wrapped: %w", err)) != ze.Status {
		t.Fatalf("StatusOf lost the status of %v", err)
	}
}

func TestErrInvalidArgument(t *testing.T) {
	_, err := New(Config{Backend: BackendHost, Alignment: 3})
	expectStatus(t, err, ErrInvalidArgument, "align")
	_, err = New(Config{Backend: Backend(42)})
	expectStatus(t, err, ErrInvalidArgument, "backend")
	if err := SetLogger(func(Record) {}, Level(9)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("SetLogger(level 9): %v", err)
	}
}

func TestErrOutOfMemory(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: miB, OverflowPolicy: OverflowRefuse})
	mustAlloc(t, a, 768*kiB)
	_, err := a.Alloc(512 * kiB)
	expectStatus(t, err, ErrOutOfMemory, "524288")
	if s := mustStats(t, a); s.Misses != 1 || s.OverflowFailures != 1 || s.LiveAllocs != 1 {
		t.Fatalf("a failed Alloc changed state: %+v", s)
	}
	// A 1 PiB request fails the same way.
	_, err = a.Alloc(1 << 50)
	expectStatus(t, err, ErrOutOfMemory, "")
}

func TestErrNotOwned(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: miB})
	p := mustAlloc(t, a, 4*kiB)
	expectStatus(t, a.FreeNow(p+256, AnyEpoch), ErrNotOwned, "not the start")
	b := newHost(t, Config{CapacityBytes: miB, Name: "other"})
	q := mustAlloc(t, b, 4*kiB)
	expectStatus(t, a.FreeNow(q, AnyEpoch), ErrNotOwned, "not allocated")
	if s := mustStats(t, a); s.InvalidFrees != 2 || s.LiveAllocs != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestErrDoubleFree(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: miB})
	p := mustAlloc(t, a, 4*kiB)
	mustAlloc(t, a, 4*kiB) // p is not the top block
	if err := a.Free(p); err != nil {
		t.Fatalf("Free: %v", err)
	}
	expectStatus(t, a.FreeNow(p, AnyEpoch), ErrDoubleFree, "already freed")
}

func TestErrStale(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: miB})
	p := mustAlloc(t, a, 4*kiB)
	if err := a.Reset(); err != nil {
		t.Fatal(err)
	}
	expectStatus(t, a.FreeNow(p, AnyEpoch), ErrStale, "reset")
	if s := mustStats(t, a); s.StaleFrees != 1 {
		t.Fatalf("stale_frees %d", s.StaleFrees)
	}
}

func TestErrBackendFromFaultInjection(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: miB, OverflowPolicy: OverflowSync})
	if err := a.injectOverflowFault(2, 0, 0); err != nil {
		t.Fatalf("InjectOverflowFault: %v", err)
	}
	mustAlloc(t, a, 768*kiB)
	p := mustAlloc(t, a, 512*kiB) // first overflow allocation: served
	if s := mustStats(t, a); s.OverflowAllocs != 1 || s.OverflowLiveBytes != 512*kiB {
		t.Fatalf("overflow not used: %+v", s)
	}
	_, err := a.Alloc(512 * kiB) // second: the injected failure
	expectStatus(t, err, ErrBackend, "injected")
	if err := a.FreeNow(p, AnyEpoch); err != nil {
		t.Fatalf("Free(overflow block): %v", err)
	}
}

func TestErrNoDevice(t *testing.T) {
	a, err := New(Config{Backend: BackendCUDA, CapacityBytes: miB})
	if err == nil {
		defer a.Close()
		t.Skip("a CUDA device is usable here; ErrNoDevice cannot be provoked")
	}
	expectStatus(t, err, ErrNoDevice, "")
}

func TestErrUnsupportedNeedsCUDA(t *testing.T) {
	// Fault injection is host-only; on a CUDA arena it is ErrUnsupported. Without a
	// device the status is covered by the mapping test below.
	a, err := New(Config{Backend: BackendCUDA, CapacityBytes: miB})
	if err != nil {
		t.Skipf("no CUDA arena here (%v)", err)
	}
	defer a.Close()
	expectStatus(t, a.injectOverflowFault(1, 0, 0), ErrUnsupported, "")
}

// Statuses the host backend cannot produce (CAPTURE_UNSAFE, UNSUPPORTED, INTERNAL)
// travel the same errorFrom path; the table pins every code to its sentinel and the
// sentinel texts to the library's.
func TestStatusMappingTable(t *testing.T) {
	want := map[Status]error{
		StatusInvalidArgument: ErrInvalidArgument, StatusOutOfMemory: ErrOutOfMemory,
		StatusNotOwned: ErrNotOwned, StatusDoubleFree: ErrDoubleFree, StatusStale: ErrStale,
		StatusCaptureUnsafe: ErrCaptureUnsafe, StatusNoDevice: ErrNoDevice,
		StatusBackend: ErrBackend, StatusUnsupported: ErrUnsupported, StatusInternal: ErrInternal,
		StatusNotPinned: ErrNotPinned, StatusTooManyPins: ErrTooManyPins, StatusClosed: ErrClosed,
	}
	if len(want) != len(sentinels)-1 {
		t.Fatalf("%d sentinels, %d in the table", len(sentinels)-1, len(want))
	}
	for st, sent := range want {
		err := error(&Error{Status: st, Message: "detail"})
		if !errors.Is(err, sent) || StatusOf(err) != st || StatusOf(sent) != st {
			t.Errorf("status %d does not map to %v", st, sent)
		}
		if got := sent.Error(); got != "zarena: "+st.String() {
			t.Errorf("sentinel %q does not match the library's status string %q", got, st.String())
		}
		if !strings.Contains(err.Error(), "detail") || !strings.Contains(err.Error(), st.String()) {
			t.Errorf("Error() = %q", err.Error())
		}
	}
	unknown := &Error{Status: 99, Message: "x"}
	if unknown.Unwrap() != nil || Status(99).String() != "unknown status" {
		t.Errorf("unknown status: unwrap %v, string %q", unknown.Unwrap(), Status(99).String())
	}
	if StatusOf(nil) != StatusOK || StatusOf(errors.New("x")) != StatusInternal {
		t.Errorf("StatusOf of non-zarena errors")
	}
	if StatusOK.String() == "" {
		t.Errorf("empty status string for OK")
	}
}

// Step returns errors.Join(step's error, the reset's): the status, the sentinels and
// the *Error stay reachable through it.
func TestStatusThroughErrorsJoin(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: miB, OverflowPolicy: OverflowRefuse})
	err := a.Step(func() error {
		_, err := a.Alloc(2 * miB)
		if err == nil {
			t.Fatal("a 2 MiB request fit a 1 MiB arena with overflow refused")
		}
		_ = a.Close() // the reset after the step fails too: a joined error
		return fmt.Errorf("forward: %w", err)
	})
	if _, ok := err.(interface{ Unwrap() []error }); !ok {
		t.Fatalf("Step did not join two errors: %T %v", err, err)
	}
	if StatusOf(err) != StatusOutOfMemory {
		t.Fatalf("StatusOf(joined) = %v, want out of memory", StatusOf(err))
	}
	if !errors.Is(err, ErrOutOfMemory) || !errors.Is(err, ErrClosed) {
		t.Fatalf("errors.Is through the join: %v", err)
	}
	var ze *Error
	if !errors.As(err, &ze) || ze.Status != StatusOutOfMemory {
		t.Fatalf("errors.As through the join: %v", ze)
	}
	only := errors.Join(errors.New("unrelated"), fmt.Errorf("x: %w", ErrStale))
	if StatusOf(only) != StatusStale {
		t.Fatalf("StatusOf(join with a sentinel) = %v", StatusOf(only))
	}
	if StatusOf(errors.Join(errors.New("a"), errors.New("b"))) != StatusInternal {
		t.Fatal("StatusOf of a join without zarena errors")
	}
}

// The verdict and the advice are parsed from the message in one place; the test feeds
// it the library's own first-overflow sentence and compares with the record's fields.
func TestParseDiagnosisMatchesTheLibrarysWording(t *testing.T) {
	rec := captureLogs(t, t.Name(), LevelWarn)
	a := newHost(t, Config{CapacityBytes: miB, OverflowPolicy: OverflowRefuse})
	mustAlloc(t, a, 768*kiB)
	_, err := a.Alloc(512 * kiB)
	if !errors.Is(err, ErrOutOfMemory) {
		t.Fatalf("overflow: %v", err)
	}
	r, ok := rec.find("arena.first_overflow")
	if !ok {
		t.Fatal("no arena.first_overflow record")
	}
	wantVerdict, _ := r.Field("verdict")
	wantAdvice, _ := r.Field("advice")
	verdict, advice := parseDiagnosis(r.Message)
	if verdict == "" || verdict != wantVerdict || advice != wantAdvice {
		t.Fatalf("parseDiagnosis(%q) = %q, %q; the record says %q, %q", r.Message, verdict,
			advice, wantVerdict, wantAdvice)
	}
	// The error's own fields: filled when the library's message carries the verdict.
	var ze *Error
	errors.As(err, &ze)
	if ze.Verdict != wantVerdict || ze.Advice != wantAdvice {
		t.Fatalf("the error %q parses to %q, %q; the record says %q, %q", ze.Message,
			ze.Verdict, ze.Advice, wantVerdict, wantAdvice)
	}
}

func TestParseDiagnosisForms(t *testing.T) {
	cases := []struct{ msg, verdict, advice string }{
		{"arena full, verdict never_reset: no reset yet. Fix: call zarena_reset after every " +
			"step. (request 1 MiB, 1 GiB of 1 GiB in use, overflow refused)", "never_reset",
			"call zarena_reset after every step"},
		{"arena 'x' is full and overflow failed (limit): requested 10 bytes; verdict=" +
			"working_set_full; Fix: raise the capacity (ZARENA_CAPACITY_BYTES or " +
			"ZERFOO_ARENA_SIZE_GB) or reduce the batch size.", "working_set_full",
			"raise the capacity (ZARENA_CAPACITY_BYTES or ZERFOO_ARENA_SIZE_GB) or reduce the " +
				"batch size"},
		{"verdict: fragmentation\nadvice: free in reverse order\nfacts ...", "fragmentation",
			"free in reverse order"},
		{"arena 'a' is full and overflow failed (refused): requested 8 bytes: overflow policy " +
			"is REFUSE. verdict=reset_stopped; fix: call zarena_reset after every step again, " +
			"and check the code path around it", "reset_stopped",
			"call zarena_reset after every step again, and check the code path around it"},
		{"request of 1 PiB is larger than any arena can serve", "", ""},
		{"Fix: something, but no verdict", "", ""},
	}
	for _, c := range cases {
		v, adv := parseDiagnosis(c.msg)
		if v != c.verdict || adv != c.advice {
			t.Errorf("parseDiagnosis(%q) = %q, %q; want %q, %q", c.msg, v, adv, c.verdict, c.advice)
		}
	}
	err := errors.Join(errors.New("x"), fmt.Errorf("y: %w", newError(StatusOutOfMemory, cases[0].msg)))
	if v, adv := DiagnosisOf(err); v != "never_reset" || adv != cases[0].advice {
		t.Fatalf("DiagnosisOf through a join: %q, %q", v, adv)
	}
}

func TestErrNotLoadedOnlyForALoadFailure(t *testing.T) {
	if errors.Is(newError(StatusUnsupported, "x"), ErrNotLoaded) {
		t.Fatal("an ordinary ErrUnsupported matched ErrNotLoaded")
	}
	if err := Available(); err != nil {
		t.Fatalf("Available() = %v in build mode %s", err, BuildMode)
	}
}
