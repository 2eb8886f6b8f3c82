package zarena

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// The 1.1 fields travel from Config through toC to the library, as its arena.config
// record reports them.
func TestConfigNewFieldsReachTheLibrary(t *testing.T) {
	rec := captureLogs(t, t.Name(), LevelInfo)
	newHost(t, Config{
		CapacityBytes:      miB,
		OverflowLimitBytes: OverflowUnlimited,
		PoisonWord:         0xA5A5A5A5,
		CommitChunkBytes:   128 * miB,
		TrimKeepBytes:      miB,
		TraceFile:          "/tmp/zarena-go-test.trace",
		Flags:              FlagStepRecords | FlagManagedFallback,
		OverflowSlow:       25 * time.Millisecond,
	})
	r, ok := rec.find("arena.config")
	if !ok {
		t.Fatal("no arena.config record")
	}
	want := map[string]any{
		"overflow_limit_bytes":        uint64(OverflowUnlimited),
		"poison_word":                 uint64(0xA5A5A5A5),
		"commit_chunk_bytes":          uint64(128 * miB),
		"trim_keep_bytes":             uint64(miB),
		"trace_file":                  "/tmp/zarena-go-test.trace",
		"trace_file_source":           "config",
		"flags.step_records":          true,
		"flags.managed_fallback":      true,
		"flags.expandable":            false,
		"overflow_slow_ns":            uint64(25 * time.Millisecond),
		"name":                        t.Name(),
		"overflow_limit_bytes_source": "config",
	}
	for key, v := range want {
		got, ok := r.Field(key)
		if !ok || got != v {
			t.Errorf("arena.config %s = %v (%T), want %v (%T)", key, got, got, v, v)
		}
	}
}

func TestDefaultConfigReadsTheNewVariables(t *testing.T) {
	t.Setenv("ZARENA_COMMIT_CHUNK_BYTES", "256MiB")
	t.Setenv("ZARENA_POISON_WORD", "0x7FC00000")
	t.Setenv("ZARENA_TRACE_FILE", "/tmp/from-env.trace")
	t.Setenv("ZARENA_EXPANDABLE", "1")
	t.Setenv("ZARENA_OVERFLOW_LIMIT_BYTES", "unlimited")
	c := DefaultConfig()
	if c.CommitChunkBytes != 256*miB || c.PoisonWord != 0x7FC00000 ||
		c.TraceFile != "/tmp/from-env.trace" || c.Flags&FlagExpandable == 0 ||
		c.OverflowLimitBytes != OverflowUnlimited {
		t.Fatalf("DefaultConfig = %+v", c)
	}
}

func TestOverflowIsCappedAtTheCapacityByDefault(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: miB, OverflowPolicy: OverflowSync})
	if _, err := a.Alloc(2 * miB); !errors.Is(err, ErrOutOfMemory) {
		t.Fatalf("2 MiB on a 1 MiB arena with the default cap: %v, want ErrOutOfMemory", err)
	}
	b := newHost(t, Config{CapacityBytes: miB, OverflowPolicy: OverflowSync,
		OverflowLimitBytes: OverflowUnlimited})
	p := mustAlloc(t, b, 2*miB)
	if err := b.FreeNow(p, AnyEpoch); err != nil {
		t.Fatal(err)
	}
}

func TestStrictConfigRefusesAnUnknownVariable(t *testing.T) {
	t.Setenv("ZARENA_CAPACTY_BYTES", "1GiB")
	_, err := New(Config{Backend: BackendHost, CapacityBytes: miB, Flags: FlagStrictConfig})
	if StatusOf(err) != StatusInvalidArgument ||
		!strings.Contains(err.Error(), "did you mean ZARENA_CAPACITY_BYTES?") {
		t.Fatalf("strict New with a misspelled variable: %v", err)
	}
}

func TestEnumNamesMatchTheLibrary(t *testing.T) {
	if BackendCUDA.String() != "cuda" || OverflowRefuse.String() != "refuse" ||
		Backend(7).String() != "invalid" || OverflowPolicy(-1).String() != "invalid" {
		t.Fatal("names drifted from the table")
	}
}

// An engine forces options off whatever the environment says: ClearFlags for flags, Set
// for fields whose zero value must win.
func TestConfigForcesValuesOverTheEnvironment(t *testing.T) {
	t.Setenv("ZARENA_POISON", "1")
	t.Setenv("ZARENA_STEP_RECORDS", "1")
	t.Setenv("ZARENA_NAME", "from-env")
	t.Setenv("ZARENA_TRACE_FILE", t.TempDir()+"/env.trace")
	t.Setenv("ZARENA_OVERFLOW_LIMIT_BYTES", "unlimited")
	rec := captureLogs(t, "", LevelInfo)

	// The environment alone: poison on, the name, trace file and limit from it.
	env, err := New(Config{Backend: BackendHost, CapacityBytes: miB})
	if err != nil {
		t.Fatal(err)
	}
	envName := env.Name()
	p, _ := env.Alloc(kiB)
	mustAlloc(t, env, kiB)
	_ = env.FreeNow(p, AnyEpoch)
	envFills := mustStats(t, env).PoisonFills
	_ = env.Close()

	forced, err := New(Config{
		Backend: BackendHost, CapacityBytes: miB,
		ClearFlags: FlagPoison,
		Set:        FieldName | FieldTraceFile | FieldOverflowLimitBytes,
	})
	if err != nil {
		t.Fatal(err)
	}
	p, _ = forced.Alloc(kiB)
	mustAlloc(t, forced, kiB)
	_ = forced.FreeNow(p, AnyEpoch)
	forcedFills := mustStats(t, forced).PoisonFills
	forcedName := forced.Name()
	_ = forced.Close()

	if envName != "from-env" || envFills == 0 {
		t.Fatalf("the environment did not apply: name %q, poison fills %d", envName, envFills)
	}
	if forcedName != "zarena" || forcedFills != 0 {
		t.Fatalf("forced off: name %q, poison fills %d", forcedName, forcedFills)
	}
	var cfgRec Record
	for _, r := range rec.all() {
		if r.Event == "arena.config" && r.Arena == "zarena" {
			cfgRec = r
		}
	}
	want := map[string]any{
		"flags.poison":         false,
		"flags.step_records":   true, // not cleared: the environment's other flags stay
		"trace_file":           "",
		"overflow_limit_bytes": uint64(miB), // the default cap, not the environment's
	}
	for key, v := range want {
		if got, ok := cfgRec.Field(key); !ok || got != v {
			t.Errorf("arena.config %s = %v, want %v (record %v)", key, got, v, cfgRec)
		}
	}
}

func TestConfigSetAllFieldsIgnoresTheEnvironment(t *testing.T) {
	t.Setenv("ZARENA_CAPACITY_BYTES", "2MiB")
	// Every field as given: capacity 0 reaches the library, which refuses it.
	_, err := New(Config{Backend: BackendHost, Set: AllFields})
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "capacity") {
		t.Fatalf("Set: AllFields with capacity 0: %v", err)
	}
	a := newHost(t, Config{CapacityBytes: miB, Alignment: 256, Set: AllFields &^ FieldBackend})
	if c := mustStats(t, a).CapacityBytes; c != miB {
		t.Fatalf("capacity %d", c)
	}
}

func TestConfigFlagBothSetAndCleared(t *testing.T) {
	_, err := New(Config{Backend: BackendHost, Flags: FlagPoison, ClearFlags: FlagPoison})
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "ClearFlags") {
		t.Fatalf("flag set and cleared: %v", err)
	}
}
