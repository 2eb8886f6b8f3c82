//go:build cgo

package zarena

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// The slog bridge logs what New was given, not every setting: the settings left at their
// defaults stay out of the record (SetLogger's Record still has them all).
func TestSlogConfigRecordLeavesDefaultsOut(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	h := slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, nil)
	if err := SetLogger(SlogLogger(h)); err != nil {
		t.Fatal(err)
	}
	defer SetLogger(nil, LevelFromEnv())
	a, err := New(Config{Backend: BackendHost, CapacityBytes: 4 << 20, Name: "slogcfg"})
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	FlushLogs()
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	var line string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "event=arena.config") && strings.Contains(l, "slogcfg") {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("no arena.config record:\n%s", out)
	}
	if !strings.Contains(line, "capacity_bytes=4194304") || !strings.Contains(line, "capacity_bytes_source=config") {
		t.Errorf("the capacity the program set is missing: %s", line)
	}
	if strings.Contains(line, "alignment=") || strings.Contains(line, "poison_word_source=") {
		t.Errorf("settings left at their defaults are logged: %s", line)
	}
	if !strings.Contains(line, fmt.Sprintf("arena_id=%d", a.ID())) {
		t.Errorf("the record does not name its arena by id %d: %s", a.ID(), line)
	}
	if n := strings.Count(line, "="); n > 31 {
		t.Errorf("%d attributes in the config record: %s", n, line)
	}
}
