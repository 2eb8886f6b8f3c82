// Graph-stable steps (zarena/zarena_graph.h, experimental): the extern "C" shims.
#include "handle.h"
#include "zarena/zarena_graph.h"

using zarena_core::Arena;
using zarena_core::guarded;
using zarena_core::Status;

extern "C" {

zarena_status zarena_graph_capture_begin(zarena* a) {
  Arena* arena = zarena_core::checked(a, "zarena_graph_capture_begin");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return guarded("zarena_graph_capture_begin",
                 [&] { return zarena_core::report(arena->graph_capture_begin()); });
}

zarena_status zarena_graph_capture_end(zarena* a, int keep, uint32_t* out_graph) {
  Arena* arena = zarena_core::checked(a, "zarena_graph_capture_end");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  if (out_graph == nullptr) {
    return zarena_core::fail(Status::kInvalidArgument,
                             "zarena_graph_capture_end: out_graph is NULL (the capture goes on)");
  }
  return guarded("zarena_graph_capture_end", [&] {
    uint32_t id = 0;
    const zarena_status st = zarena_core::report(arena->graph_capture_end(keep != 0, &id));
    *out_graph = id;
    return st;
  });
}

zarena_status zarena_graph_replay(zarena* a, uint32_t graph) {
  Arena* arena = zarena_core::checked(a, "zarena_graph_replay");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return guarded("zarena_graph_replay",
                 [&] { return zarena_core::report(arena->graph_replay(graph)); });
}

zarena_status zarena_graph_release(zarena* a, uint32_t graph) {
  Arena* arena = zarena_core::checked(a, "zarena_graph_release");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return guarded("zarena_graph_release",
                 [&] { return zarena_core::report(arena->graph_release(graph)); });
}

zarena_status zarena_graph_free_after(zarena* a, void* ptr, void* stream) {
  Arena* arena = zarena_core::checked(a, "zarena_graph_free_after");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return static_cast<zarena_status>(arena->graph_free_after(ptr, stream));  // noexcept
}

zarena_status zarena_graph_get_info(zarena* a, zarena_graph_info* out) {
  Arena* arena = zarena_core::checked(a, "zarena_graph_get_info");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  if (out == nullptr || out->struct_size < sizeof(uint32_t)) {
    return zarena_core::fail(Status::kInvalidArgument,
                             "zarena_graph_get_info: out is NULL or its struct_size is smaller "
                             "than the first field");
  }
  return guarded("zarena_graph_get_info", [&] {
    Arena::GraphInfo g;
    arena->graph_info(&g);
    zarena_graph_info full{};
    full.struct_size = sizeof full;
    full.ready = g.ready ? 1 : 0;
    full.capturing = g.counts.capturing ? 1 : 0;
    full.graphs = g.counts.graphs;
    full.period = g.period;
    full.phase = g.phase;
    full.captures = g.counts.captures;
    full.failed_captures = g.counts.failed_captures;
    full.refused_allocs = g.counts.refused_allocs;
    full.replays = g.counts.replays;
    full.refused_replays = g.counts.refused_replays;
    full.stream_joins = g.counts.stream_joins;
    full.zone_bytes = g.zone_bytes;
    const uint32_t given = out->struct_size;
    zarena_core::write_versioned(out, given, &full, sizeof full);
    out->struct_size = given;
    return ZARENA_OK;
  });
}

}  // extern "C"
