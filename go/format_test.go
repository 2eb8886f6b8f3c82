package zarena

import (
	"bytes"
	"encoding/json"
	"errors"
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

func TestFormatStatsTextNamesEveryField(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: 4 * miB})
	mustAlloc(t, a, 3000)
	text, err := a.FormatStats(false)
	if err != nil {
		t.Fatal(err)
	}
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
	a := newHost(t, Config{CapacityBytes: 4 * miB})
	mustAlloc(t, a, 3000)
	text, err := a.FormatStats(true)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := objectKeys(t, text), statsKeys(); !reflect.DeepEqual(got, want) {
		t.Fatalf("JSON keys\n got %v\nwant %v", got, want)
	}
	var s Stats
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		t.Fatal(err)
	}
	if now := a.Stats(); s != now { // one goroutine: nothing moved in between
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
	text, err := a.FormatStats(true)
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
	text, err = a.FormatLiveBlocks(true)
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
	s := a.Stats()
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
	s = a.Stats()
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
	if s = a.Stats(); s.UsedPeakBytes != 612*kiB || s.UsedBytes != 0 {
		t.Fatalf("a peak does not fall: %+v", s)
	}
	if err := a.Reset(); err != nil {
		t.Fatal(err)
	}
	hw := a.Stats().HighWaterBytes
	if err := a.ResetPeakStats(); err != nil {
		t.Fatal(err)
	}
	s = a.Stats()
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
		if got := a.Stats().UsedPeakBytes; got != step*miB {
			t.Fatalf("step %d: UsedPeakBytes %d, want %d", step, got, step*miB)
		}
	}
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
	text, err := a.FormatLiveBlocks(true)
	if err != nil {
		t.Fatal(err)
	}
	var got, want liveBlocksJSON
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("%v: %s", err, text)
	}
	var buf bytes.Buffer
	if err := a.WriteLiveBlocksJSON(&buf); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(buf.Bytes(), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("library's dump\n%s\nGo's\n%s", text, buf.String())
	}
	if got.Arena != a.Name() || got.Count != 2 || got.Blocks[0].Tag == nil ||
		*got.Blocks[0].Tag != tag.Name() || !got.Blocks[1].Overflow {
		t.Fatalf("dump %s", text)
	}
	table, err := a.FormatLiveBlocks(false)
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
		text, err := a.FormatLiveBlocks(i%2 == 0)
		if err != nil {
			close(stop)
			wg.Wait()
			t.Fatal(err)
		}
		if i%2 == 0 && !json.Valid([]byte(text)) {
			close(stop)
			wg.Wait()
			t.Fatalf("not JSON: %.200s", text)
		}
		if _, err := a.FormatStats(i%2 == 0); err != nil {
			close(stop)
			wg.Wait()
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if s := a.Stats(); s.LiveAllocs != 0 {
		t.Fatalf("live blocks left: %+v", s)
	}
}

func TestFormatAndResetPeakAfterClose(t *testing.T) {
	a, err := New(Config{Backend: BackendHost, CapacityBytes: miB, Name: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.FormatStats(false); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("FormatStats after Close: %v", err)
	}
	if _, err := a.FormatStats(true); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("FormatStats(json) after Close: %v", err)
	}
	if _, err := a.FormatLiveBlocks(false); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("FormatLiveBlocks after Close: %v", err)
	}
	if err := a.ResetPeakStats(); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("ResetPeakStats after Close: %v", err)
	}
}
