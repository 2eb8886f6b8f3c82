package zarena

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// statsKeys are Stats' JSON keys in struct order (the zarena_stats field names).
func statsKeys() []string {
	st := reflect.TypeOf(Stats{})
	keys := make([]string, st.NumField())
	for i := range keys {
		keys[i] = st.Field(i).Tag.Get("json")
	}
	return keys
}

// objectKeys returns the keys of one JSON object in the order they appear.
func objectKeys(t *testing.T, text string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(text))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not a JSON object: %v %v: %q", tok, err, text)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("JSON: %v: %q", err, text)
		}
		keys = append(keys, tok.(string))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("JSON value of %v: %v", tok, err)
		}
	}
	return keys
}

// formatOneBlock formats the stats of an arena that holds one block of 3000 bytes.
func formatOneBlock(t *testing.T, f Format) (*Arena, string) {
	t.Helper()
	a := newHost(t, Config{CapacityBytes: 4 * miB})
	mustAlloc(t, a, 3000)
	text, err := a.FormatStats(f)
	if err != nil {
		t.Fatal(err)
	}
	return a, text
}

func TestFormatStatsTextNamesEveryField(t *testing.T) {
	a, text := formatOneBlock(t, FormatText)
	if !strings.HasSuffix(text, "\n") || !strings.Contains(text, a.Name()) {
		t.Fatalf("table:\n%s", text)
	}
	// Every field has its line, or is in a group of zeros the last line names.
	zeros := regexp.MustCompile(`(?m)^all zero, not shown: `).MatchString(text)
	for _, k := range statsKeys() {
		if !regexp.MustCompile(`(?m)^\s*`+k+`\s`).MatchString(text) && !zeros {
			t.Errorf("the table has no line for %s:\n%s", k, text)
		}
	}
}

func TestFormatStatsJSONKeysAreStatsKeys(t *testing.T) {
	a, text := formatOneBlock(t, FormatJSON)
	if got, want := objectKeys(t, text), statsKeys(); !reflect.DeepEqual(got, want) {
		t.Fatalf("JSON keys\n got %v\nwant %v", got, want)
	}
	var s Stats
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		t.Fatal(err)
	}
	if now := mustStats(t, a); s != now { // one goroutine: nothing moved in between
		t.Fatalf("FormatStats %+v\n      Stats %+v", s, now)
	}
	if s.UsedBytes != 3072 || s.LiveAllocs != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// The format calls apply the queued frees first, as Stats does.
func TestFormatAppliesQueuedFrees(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 4 * miB})
	p := mustAlloc(t, a, 64*kiB)
	mustAlloc(t, a, 4*kiB)
	if err := a.Free(p); err != nil { // queued
		t.Fatal(err)
	}
	text, err := a.FormatStats(FormatJSON)
	if err != nil {
		t.Fatal(err)
	}
	var s Stats
	if err := json.Unmarshal([]byte(text), &s); err != nil {
		t.Fatal(err)
	}
	if s.LiveAllocs != 1 || s.UsedBytes != 4*kiB {
		t.Fatalf("the queued free was not applied first: %+v", s)
	}
	q := mustAlloc(t, a, kiB)
	if err := a.Free(q); err != nil {
		t.Fatal(err)
	}
	var doc liveBlocksJSON
	text, err = a.FormatLiveBlocks(FormatJSON)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Count != 1 || doc.Bytes != 4*kiB {
		t.Fatalf("the queued free was not applied first: %s", text)
	}
}

func TestResetPeakStats(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 4 * miB, OverflowPolicy: OverflowSync,
		OverflowLimitBytes: OverflowUnlimited})
	big := mustAlloc(t, a, 3*miB)
	over := mustAlloc(t, a, 2*miB) // overflow
	small := mustAlloc(t, a, 100*kiB)
	s := mustStats(t, a)
	if s.UsedPeakBytes != 3*miB+100*kiB || s.OverflowPeakBytes != 2*miB ||
		s.HighWaterBytes < 3*miB+100*kiB {
		t.Fatalf("peaks before: %+v", s)
	}
	epochHW, epochMax := s.EpochHighWaterBytes, s.EpochMaxAllocBytes

	// Queued frees are applied before the peaks restart: they restart from what is left.
	if err := a.Free(big); err != nil {
		t.Fatal(err)
	}
	if err := a.Free(over); err != nil {
		t.Fatal(err)
	}
	if err := a.ResetPeakStats(); err != nil {
		t.Fatal(err)
	}
	s = mustStats(t, a)
	if s.UsedBytes != 100*kiB || s.UsedPeakBytes != s.UsedBytes {
		t.Fatalf("UsedPeakBytes %d, UsedBytes %d: want both %d", s.UsedPeakBytes, s.UsedBytes,
			100*kiB)
	}
	if s.OverflowLiveBytes != 0 || s.OverflowPeakBytes != 0 || s.HighWaterBytes != s.TopBytes {
		t.Fatalf("peaks after ResetPeakStats: %+v", s)
	}
	if s.EpochHighWaterBytes != epochHW || s.EpochMaxAllocBytes != epochMax {
		t.Fatalf("epoch figures changed: %+v", s)
	}

	p := mustAlloc(t, a, 512*kiB) // rises again from there
	if err := a.Free(p); err != nil {
		t.Fatal(err)
	}
	if err := a.Free(small); err != nil {
		t.Fatal(err)
	}
	if s = mustStats(t, a); s.UsedPeakBytes != 612*kiB || s.UsedBytes != 0 {
		t.Fatalf("a peak does not fall: %+v", s)
	}
	if err := a.Reset(); err != nil {
		t.Fatal(err)
	}
	hw := mustStats(t, a).HighWaterBytes
	if err := a.ResetPeakStats(); err != nil {
		t.Fatal(err)
	}
	s = mustStats(t, a)
	if s.UsedPeakBytes != 0 || s.HighWaterBytes != 0 || s.TopBytes != 0 || hw == 0 {
		t.Fatalf("after frees, Reset and ResetPeakStats: %+v (high water before %d)", s, hw)
	}
}

// One step's peak, the use zarena.h describes: ResetPeakStats before the step, Stats
// after it.
func TestResetPeakStatsPerStep(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 16 * miB})
	for step := uint64(1); step <= 3; step++ {
		if err := a.ResetPeakStats(); err != nil {
			t.Fatal(err)
		}
		err := a.Step(func() error {
			var ps []DevicePtr
			for i := uint64(0); i < step; i++ {
				ps = append(ps, mustAlloc(t, a, miB))
			}
			for _, p := range ps {
				if err := a.Free(p); err != nil {
					return err
				}
			}
			mustAlloc(t, a, 256*kiB)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := mustStats(t, a).UsedPeakBytes; got != step*miB {
			t.Fatalf("step %d: UsedPeakBytes %d, want %d", step, got, step*miB)
		}
	}
}

// liveBlockJSON and liveBlocksJSON are the shape of zarena_format_live_blocks' JSON (and
// Python's live_blocks_json).
type liveBlockJSON struct {
	Address    string  `json:"address"`
	Offset     *uint64 `json:"offset"` // null for overflow blocks
	Size       uint64  `json:"size"`
	Epoch      uint64  `json:"epoch"`
	Pins       uint32  `json:"pins"`
	Pinned     bool    `json:"pinned"`
	Overflow   bool    `json:"overflow"`
	Persistent bool    `json:"persistent"`
	Freed      bool    `json:"freed"`
	TagID      uint32  `json:"tag_id"`
	Tag        *string `json:"tag"` // null when untagged
}

type liveBlocksJSON struct {
	Arena  string          `json:"arena"`
	Epoch  uint64          `json:"epoch"`
	Count  int             `json:"count"`
	Bytes  uint64          `json:"bytes"`
	Blocks []liveBlockJSON `json:"blocks"`
}

// liveBlocksDump is FormatLiveBlocks(FormatJSON), decoded: every key known.
func liveBlocksDump(t *testing.T, a *Arena) (liveBlocksJSON, string) {
	t.Helper()
	text, err := a.FormatLiveBlocks(FormatJSON)
	if err != nil {
		t.Fatal(err)
	}
	var doc liveBlocksJSON
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("%v: %s", err, text)
	}
	return doc, text
}

func TestFormatLiveBlocks(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: miB, OverflowPolicy: OverflowSync,
		OverflowLimitBytes: OverflowUnlimited})
	tag, err := RegisterTag("fmt." + t.Name())
	if err != nil {
		t.Fatal(err)
	}
	b, err := a.AllocTagged(1000, tag)
	if err != nil {
		t.Fatal(err)
	}
	mustAlloc(t, a, 2*miB) // overflow
	got, text := liveBlocksDump(t, a)
	blocks, err := a.LiveBlocks()
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Blocks) != len(blocks) {
		t.Fatalf("dump %s, LiveBlocks %+v", text, blocks)
	}
	for i, lb := range blocks { // the dump says what LiveBlocks says
		d := got.Blocks[i]
		if d.Address != fmt.Sprintf("%#x", uintptr(lb.Ptr)) || d.Size != lb.Size ||
			d.Epoch != lb.Epoch || d.Pins != lb.Pins || d.Pinned != (lb.Pins > 0) ||
			d.TagID != uint32(lb.Tag) || d.Overflow != (lb.Flags&LiveOverflow != 0) ||
			d.Persistent != (lb.Flags&LivePersistent != 0) || d.Freed != (lb.Flags&LiveFreed != 0) ||
			(d.Offset == nil) != d.Overflow {
			t.Errorf("block %d: dump %+v, LiveBlocks %+v", i, d, lb)
		}
	}
	if got.Arena != a.Name() || got.Count != 2 || got.Blocks[0].Tag == nil ||
		*got.Blocks[0].Tag != tag.Name() || !got.Blocks[1].Overflow {
		t.Fatalf("dump %s", text)
	}
	table, err := a.FormatLiveBlocks(FormatText)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table, tag.Name()) || !strings.Contains(table, "overflow") ||
		!strings.Contains(strings.ToLower(table), strings.TrimPrefix(got.Blocks[0].Address, "0x")) {
		t.Fatalf("table:\n%s", table)
	}
	if err := a.FreeBlock(b); err != nil {
		t.Fatal(err)
	}
}

// The text grows while it is formatted: the call asks again with the new size.
func TestFormatWhileOthersAllocate(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 64 * miB})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []DevicePtr
			for i := 0; ; i++ {
				select {
				case <-stop:
					for _, p := range mine {
						_ = a.Free(p)
					}
					return
				default:
				}
				if len(mine) < 500 {
					if p, err := a.Alloc(256); err == nil {
						mine = append(mine, p)
					}
				} else {
					for _, p := range mine {
						_ = a.Free(p)
					}
					mine = mine[:0]
				}
			}
		}()
	}
	for i := 0; i < 50; i++ {
		text, err := a.FormatLiveBlocks(Format(i % 2))
		if err != nil {
			close(stop)
			wg.Wait()
			t.Fatal(err)
		}
		if i%2 == 1 && !json.Valid([]byte(text)) {
			close(stop)
			wg.Wait()
			t.Fatalf("not JSON: %.200s", text)
		}
		if _, err := a.FormatStats(Format(i % 2)); err != nil {
			close(stop)
			wg.Wait()
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if s := mustStats(t, a); s.LiveAllocs != 0 {
		t.Fatalf("live blocks left: %+v", s)
	}
}

func TestFormatAndResetPeakAfterClose(t *testing.T) {
	a, err := New(Config{Backend: BackendHost, CapacityBytes: miB, Name: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []Format{-1, 2} {
		if _, err := a.FormatStats(f); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("FormatStats(%d): %v", f, err)
		}
		if _, err := a.FormatLiveBlocks(f); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("FormatLiveBlocks(%d): %v", f, err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.FormatStats(FormatText); !errors.Is(err, ErrClosed) {
		t.Fatalf("FormatStats after Close: %v", err)
	}
	if _, err := a.FormatStats(FormatJSON); !errors.Is(err, ErrClosed) {
		t.Fatalf("FormatStats(FormatJSON) after Close: %v", err)
	}
	if _, err := a.FormatLiveBlocks(FormatText); !errors.Is(err, ErrClosed) {
		t.Fatalf("FormatLiveBlocks after Close: %v", err)
	}
	if err := a.ResetPeakStats(); !errors.Is(err, ErrClosed) {
		t.Fatalf("ResetPeakStats after Close: %v", err)
	}
}

func TestPinnedPeakBytes(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 4 * miB})
	p := mustAlloc(t, a, 64*kiB)
	q := mustAlloc(t, a, 32*kiB)
	for _, b := range []DevicePtr{p, q, p} {
		if err := a.Pin(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Unpin(q); err != nil {
		t.Fatal(err)
	}
	if s := mustStats(t, a); s.PinnedBytes != 64*kiB || s.PinnedPeakBytes != 96*kiB {
		t.Fatalf("PinnedBytes %d, PinnedPeakBytes %d: want 64 KiB, 96 KiB", s.PinnedBytes,
			s.PinnedPeakBytes)
	}
	if err := a.ResetPeakStats(); err != nil {
		t.Fatal(err)
	}
	if s := mustStats(t, a); s.PinnedPeakBytes != 64*kiB {
		t.Fatalf("PinnedPeakBytes %d after ResetPeakStats: want the pinned bytes now, 64 KiB",
			s.PinnedPeakBytes)
	}
}
