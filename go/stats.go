package zarena

/*
#include "shim.h"
*/
import "C"

import (
	"expvar"
	"fmt"
	"sync"
	"unsafe"
)

// Stats returns a consistent snapshot of the arena's counters, after every queued free
// was applied. The error is ErrClosed after Close.
func (a *Arena) Stats() (Stats, error) {
	return wholeValue(a, "Stats", func(h C.uintptr_t) (C.shim_stats_result, C.shim_result) {
		r := C.shim_get_stats(h)
		return r, r.r
	}, func(r *C.shim_stats_result) Stats { return statsFromC(&r.stats) })
}

// ResetPeakStats restarts the peaks from the arena's state now (zarena_reset_peak_stats,
// as PyTorch's reset_peak_memory_stats): HighWaterBytes becomes the current TopBytes,
// OverflowPeakBytes the current OverflowLiveBytes, UsedPeakBytes the current UsedBytes,
// PinnedPeakBytes the current PinnedBytes; each rises again from there. The epoch figures (Epoch*) are left alone. The queued
// frees are applied first, so the peaks restart from the state they leave. Measure one
// step's peak with ResetPeakStats before it and Stats after it. ErrClosed after Close.
func (a *Arena) ResetPeakStats() error {
	return a.whole("ResetPeakStats", func(h C.uintptr_t) C.shim_result {
		return C.shim_reset_peak_stats(h)
	})
}

// Format is the form of FormatStats' and FormatLiveBlocks' text (ZARENA_FORMAT_*).
type Format int32

const (
	FormatText Format = 0 // a table for people, ending with a newline
	FormatJSON Format = 1 // one JSON object on one line
)

// FormatStats formats one consistent stats snapshot, taken after the queued frees were
// applied, as the library does (zarena_format_stats): FormatText, a titled table for
// people, one field a line (the zarena_stats field names, grouped, sizes also in
// KiB/MiB/GiB), ending with a newline; FormatJSON, one JSON object on one line whose keys
// are exactly Stats' JSON keys, in struct order. ErrInvalidArgument for another Format;
// ErrClosed after Close.
func (a *Arena) FormatStats(f Format) (string, error) {
	return a.format("FormatStats", 0, f)
}

// format is FormatStats (what 0) and FormatLiveBlocks (what 1): one cgo call that asks
// the size and formats (again while the text grew meanwhile).
func (a *Arena) format(op string, what C.int, f Format) (string, error) {
	var r C.shim_text_result
	err := a.whole(op, func(h C.uintptr_t) C.shim_result {
		r = C.shim_format(h, what, C.int32_t(f))
		return r.r
	})
	if err != nil {
		return "", err
	}
	defer C.free(unsafe.Pointer(r.text))
	return C.GoStringN(r.text, C.int(r.len)), nil
}

// PublishExpvar publishes the arena's Stats under name in expvar (so /debug/vars shows a
// fresh snapshot at every read, keys as in Stats' JSON). expvar names are process-wide
// and cannot be removed: publishing a name twice is an error, and the published arena
// stays reachable (its finalizer never runs; Close it) and reads as the zero Stats after
// Close.
func (a *Arena) PublishExpvar(name string) error {
	if name == "" {
		return &Error{Status: StatusInvalidArgument, Message: "PublishExpvar: empty name"}
	}
	expvarMu.Lock()
	defer expvarMu.Unlock()
	if expvar.Get(name) != nil {
		return &Error{Status: StatusInvalidArgument,
			Message: fmt.Sprintf("PublishExpvar: expvar %q is published already", name)}
	}
	expvar.Publish(name, expvar.Func(func() any {
		s, _ := a.Stats()
		return s
	}))
	return nil
}

// expvarMu makes PublishExpvar's check-then-publish atomic (expvar.Publish panics on a
// name that exists).
var expvarMu sync.Mutex
