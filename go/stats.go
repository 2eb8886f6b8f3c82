package zarena

/*
#include "zgo.h"
*/
import "C"

import (
	"expvar"
	"fmt"
	"sync"
	"unsafe"
)

// Stats returns a consistent snapshot of the arena's counters, after the queued frees
// were applied (the zero Stats after Close).
func (a *Arena) Stats() Stats {
	s, _ := a.StatsErr()
	return s
}

// StatsErr is Stats with the error of a failed call (a closed arena).
func (a *Arena) StatsErr() (Stats, error) {
	b, h, err := a.q.takeExclusive("Stats", false)
	if err != nil {
		return Stats{}, err
	}
	q, nq, qs := b.cargs()
	r := C.zgo_get_stats(h, q, nq, qs)
	a.q.release(b, r.qfailed)
	keepAlive(a)
	if err := callError(r.status, r.err); err != nil {
		return Stats{}, err
	}
	return statsFromC(&r.stats), nil
}

// ResetPeakStats restarts the peaks from the arena's state now (zarena_reset_peak_stats,
// as PyTorch's reset_peak_memory_stats): HighWaterBytes becomes the current TopBytes,
// OverflowPeakBytes the current OverflowLiveBytes, UsedPeakBytes the current UsedBytes;
// each rises again from there. The epoch figures (Epoch*) are left alone. The queued
// frees are applied first, so the peaks restart from the state they leave. Measure one
// step's peak with ResetPeakStats before it and Stats after it. ErrInvalidArgument after
// Close.
func (a *Arena) ResetPeakStats() error {
	b, h, err := a.q.takeExclusive("ResetPeakStats", false)
	if err != nil {
		return err
	}
	q, nq, qs := b.cargs()
	r := C.zgo_reset_peak_stats(h, q, nq, qs)
	a.q.release(b, r.qfailed)
	keepAlive(a)
	return callError(r.status, r.err)
}

// FormatStats formats one consistent stats snapshot, taken after the queued frees were
// applied, as the library does (zarena_format_stats): with json false a titled table for
// people, one field a line (the zarena_stats field names, grouped, sizes also in
// KiB/MiB/GiB), ending with a newline; with json true one JSON object on one line whose
// keys are exactly Stats' JSON keys, in struct order. ErrInvalidArgument after Close.
func (a *Arena) FormatStats(json bool) (string, error) {
	return a.format("FormatStats", 0, json)
}

// format is FormatStats (what 0) and FormatLiveBlocks (what 1): one cgo call that applies
// the queued frees, asks the size, and formats (again while the text grew meanwhile).
func (a *Arena) format(op string, what C.int, json bool) (string, error) {
	f := C.int32_t(C.ZARENA_FORMAT_TEXT)
	if json {
		f = C.ZARENA_FORMAT_JSON
	}
	b, h, err := a.q.takeExclusive(op, false)
	if err != nil {
		return "", err
	}
	q, nq, qs := b.cargs()
	r := C.zgo_format(h, q, nq, qs, what, f)
	a.q.release(b, r.qfailed)
	keepAlive(a)
	if err := callError(r.status, r.err); err != nil {
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
	expvar.Publish(name, expvar.Func(func() any { return a.Stats() }))
	return nil
}

// expvarMu makes PublishExpvar's check-then-publish atomic (expvar.Publish panics on a
// name that exists).
var expvarMu sync.Mutex
