package zarena

/*
#include "shim.h"
*/
import "C"

// The diagnosis on demand (zarena.h, "Diagnosis").

// Diagnosis is zarena_diagnose: the verdict ("ok" when nothing is wrong; else one of
// never_reset, reset_stopped, runaway_buffer, working_set_full, fragmentation,
// capture_refused, commit_failed), the one-sentence fix, what the counters show, and the
// facts behind them. A failed allocation's *Error carries the same verdict and advice.
type Diagnosis struct {
	Verdict           string
	Advice            string
	Cause             string
	Overflowed        bool   // this epoch's region was exhausted: the verdict is that one's
	Warned            bool   // the early warning (arena.reset_cadence) was logged
	Epoch             uint64 // the current epoch
	Resets            uint64
	Steps             uint64 // steps of this epoch as the loop counts them (0: none seen)
	StepsExplicit     bool   // counted by Step (facts), not recognised (a guess)
	KeptBytes         uint64 // live bytes the steps of this epoch kept
	StepsToFull       uint64 // at the rate the steps grow the top (0: unknown)
	CapacityBytes     uint64
	TopBytes          uint64
	FloorBytes        uint64
	LiveBytes         uint64 // region and overflow
	OverflowLiveBytes uint64
	EpochAllocs       uint64
	EpochPeakBytes    uint64 // this epoch's highest top above the floor
	PriorEpochs       uint64 // earlier epochs compared (up to 8)
	PriorPeakBytes    uint64
	PriorAllocs       uint64
	OverflowEpochs    uint64
	NeededBytes       uint64 // the capacity the workload needed so far
	RequestedBytes    uint64 // the request that first overflowed this epoch (0: none)
}

// Diagnose returns the diagnosis now (after the queued frees). Any goroutine, any time.
func (a *Arena) Diagnose() (Diagnosis, error) {
	return wholeValue(a, "Diagnose", func(h C.uintptr_t) (C.shim_diagnosis_result, C.shim_result) {
		r := C.shim_diagnose(h)
		return r, r.r
	}, diagnosisFromC)
}

func diagnosisFromC(r *C.shim_diagnosis_result) Diagnosis {
	d := &r.d
	return Diagnosis{
		Verdict:           C.GoString(&r.verdict[0]),
		Advice:            C.GoString(&r.advice[0]),
		Cause:             C.GoString(&r.cause[0]),
		Overflowed:        d.overflowed != 0,
		Warned:            d.warned != 0,
		Epoch:             uint64(d.epoch),
		Resets:            uint64(d.resets),
		Steps:             uint64(d.steps),
		StepsExplicit:     d.steps_explicit != 0,
		KeptBytes:         uint64(d.kept_bytes),
		StepsToFull:       uint64(d.steps_to_full),
		CapacityBytes:     uint64(d.capacity_bytes),
		TopBytes:          uint64(d.top_bytes),
		FloorBytes:        uint64(d.floor_bytes),
		LiveBytes:         uint64(d.live_bytes),
		OverflowLiveBytes: uint64(d.overflow_live_bytes),
		EpochAllocs:       uint64(d.epoch_allocs),
		EpochPeakBytes:    uint64(d.epoch_peak_bytes),
		PriorEpochs:       uint64(d.prior_epochs),
		PriorPeakBytes:    uint64(d.prior_peak_bytes),
		PriorAllocs:       uint64(d.prior_allocs),
		OverflowEpochs:    uint64(d.overflow_epochs),
		NeededBytes:       uint64(d.needed_bytes),
		RequestedBytes:    uint64(d.requested_bytes),
	}
}
