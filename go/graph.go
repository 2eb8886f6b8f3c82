package zarena

/*
#include "shim.h"
*/
import "C"

// Graph-stable steps (EXPERIMENTAL; zarena/zarena_graph.h is the contract, docs/PLANS.md
// "Graph-stable steps" the notes): a planned step captured into a CUDA graph once and
// replayed every step in the step plan's own memory. The engine captures and launches the
// graph itself; the arena is told where the capture begins and ends and when a launch is a
// replay. With an arena opened through dlopen from a library without these calls, each
// returns ErrUnsupported.
//
//	a.StepBegin()
//	a.GraphCaptureBegin()            // then cudaStreamBeginCapture
//	... the step: every allocation must be the plan's (any other: ErrCaptureUnsafe) ...
//	g, err := a.GraphCaptureEnd(true) // after cudaStreamEndCapture; the step ends here
//	a.GraphReplay(g); launch          // the first launch: the captured step itself
//	for each later step: a.StepBegin(); a.GraphReplay(g); launch
//	a.GraphRelease(g)

// GraphInfo is zarena_graph_info: whether a capture may begin now, the plan's period and
// the phase of the step starting now, the graphs alive and the counters.
type GraphInfo struct {
	Ready          bool
	Capturing      bool
	Graphs         uint32
	Period         uint32 // 1 or 2 (0: no plan)
	Phase          uint32 // of the step starting now
	Captures       uint64
	FailedCaptures uint64
	RefusedAllocs  uint64
	Replays        uint64
	RefusedReplays uint64
	StreamJoins    uint64
	ZoneBytes      uint64
}

func (a *Arena) graphCall(op string, code C.int, keep bool, graph uint32) (uint32, error) {
	var id uint32
	k := C.int(0)
	if keep {
		k = 1
	}
	err := a.whole(op, func(h C.uintptr_t) C.shim_result {
		r := C.shim_graph(h, code, k, C.uint32_t(graph))
		id = uint32(r.graph)
		a.setPlanLocked(r.view) // a capture's end ends a step: the plan may have moved
		return r.r
	})
	return id, err
}

// GraphCaptureBegin says that the step starting now is captured (zarena_graph_capture_begin):
// call it at a step boundary, once GraphInfo says Ready, before the stream capture begins.
// ErrCaptureUnsafe (nothing changed) says why not; ErrUnsupported when plans are off.
func (a *Arena) GraphCaptureBegin() error {
	_, err := a.graphCall("GraphCaptureBegin", 0, false, 0)
	return err
}

// GraphCaptureEnd ends the capture and its step (zarena_graph_capture_end): the graph's id
// when the step was served whole by the plan and keep is true; 0 otherwise (with
// ErrCaptureUnsafe saying why, unless keep is false).
func (a *Arena) GraphCaptureEnd(keep bool) (uint32, error) {
	return a.graphCall("GraphCaptureEnd", 1, keep, 0)
}

// GraphReplay says that the step starting now is a replay of graph g: call it before every
// launch, the first one after the capture included (zarena_graph_replay). ErrCaptureUnsafe
// (nothing changed: do not launch) when a replay now would write over a live block, or the
// plan is elsewhere.
func (a *Arena) GraphReplay(g uint32) error {
	_, err := a.graphCall("GraphReplay", 2, false, g)
	return err
}

// GraphRelease says that graph g will not be launched again (zarena_graph_release).
func (a *Arena) GraphRelease(g uint32) error {
	_, err := a.graphCall("GraphRelease", 3, false, g)
	return err
}

// GraphFreeAfter frees p after the work queued on stream so far (zarena_graph_free_after):
// the arena's stream waits for stream first, an edge of the graph during a capture. stream
// is a cudaStream_t as an integer.
func (a *Arena) GraphFreeAfter(p DevicePtr, stream uintptr) error {
	return a.whole("GraphFreeAfter", func(h C.uintptr_t) C.shim_result {
		return C.shim_graph_free_after(h, C.uintptr_t(p), C.uintptr_t(stream))
	})
}

// GraphInfo reads zarena_graph_get_info.
func (a *Arena) GraphInfo() (GraphInfo, error) {
	var g GraphInfo
	err := a.whole("GraphInfo", func(h C.uintptr_t) C.shim_result {
		r := C.shim_graph_info(h)
		i := r.info
		g = GraphInfo{Ready: i.ready != 0, Capturing: i.capturing != 0, Graphs: uint32(i.graphs),
			Period: uint32(i.period), Phase: uint32(i.phase), Captures: uint64(i.captures),
			FailedCaptures: uint64(i.failed_captures), RefusedAllocs: uint64(i.refused_allocs),
			Replays: uint64(i.replays), RefusedReplays: uint64(i.refused_replays),
			StreamJoins: uint64(i.stream_joins), ZoneBytes: uint64(i.zone_bytes)}
		return r.r
	})
	return g, err
}
