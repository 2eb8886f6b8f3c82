package zarena

import (
	"bytes"
	"encoding/json"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// The README's pattern, SetLogger(SlogLogger(h)) + log.Fatal(err), must show the diagnosis every
// time: the verdict was lost in 11 of 20 runs when records were only delivered
// asynchronously (os.Exit wins). Each run is a child process (this test binary, in
// helper mode) that trains without resetting until Alloc fails, then calls log.Fatal.
const logFatalRuns = 100

// logFatalChild is the child's main: it never returns.
func logFatalChild() {
	if err := SetLogger(SlogLogger(slog.NewJSONHandler(os.Stdout, nil))); err != nil {
		log.Fatal(err)
	}
	a, err := New(Config{Backend: BackendHost, CapacityBytes: 64 * miB,
		OverflowPolicy: OverflowRefuse, Name: "logfatal"})
	if err != nil {
		log.Fatal(err)
	}
	// Per-sample gradient accumulation that never resets (the failure zarena exists for).
	forward := []uint64{3 * miB / 2, 768 * kiB, 2 * miB, 512 * kiB}
	backward := []uint64{2 * miB, miB, 256 * kiB, 384 * kiB}
	for {
		if err := a.StepBegin(); err != nil {
			log.Fatal(err)
		}
		for _, n := range forward {
			if _, err := a.Alloc(n); err != nil {
				log.Fatal(err)
			}
		}
		for _, n := range backward {
			p, err := a.Alloc(n)
			if err != nil {
				log.Fatal(err)
			}
			_ = a.Free(p)
		}
	}
}

func TestLogFatalKeepsTheDiagnosis(t *testing.T) {
	runs := logFatalRuns
	if testing.Short() {
		runs = 10
	}
	type outcome struct {
		stdout, stderr string
		err            error
	}
	results := make([]outcome, runs)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i := 0; i < runs; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "ZARENA_TEST_HELPER_MODE=go-log-fatal",
				"ZARENA_LOG_LEVEL=info")
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			err := cmd.Run()
			results[i] = outcome{out.String(), errOut.String(), err}
		}(i)
	}
	wg.Wait()
	lost := 0
	for i, r := range results {
		if ee, ok := r.err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Fatalf("run %d: exit %v (log.Fatal exits 1)\nstderr: %s", i, r.err, r.stderr)
		}
		if !strings.Contains(r.stderr, "out of memory") {
			t.Fatalf("run %d: log.Fatal did not print the error: %s", i, r.stderr)
		}
		verdict, warned := "", false
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) != nil {
				continue
			}
			switch rec["event"] {
			case "arena.first_overflow":
				verdict, _ = rec["verdict"].(string)
			case "arena.reset_cadence":
				warned = true
			}
		}
		if verdict != "never_reset" || !warned {
			lost++
			if lost <= 3 {
				t.Errorf("run %d: verdict %q, early warning %v; stdout:\n%s", i, verdict, warned,
					r.stdout)
			}
		}
	}
	if lost > 0 {
		t.Fatalf("the diagnosis was lost in %d of %d runs", lost, runs)
	}
	t.Logf("%d of %d runs: verdict never_reset and the early warning reached slog before log.Fatal",
		runs, runs)
}
