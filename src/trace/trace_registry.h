// Process-wide bookkeeping for tracers: which are open (so an atexit handler can finish
// them, and an exiting thread can hand its buffers to the ones still alive), and the
// per-thread list of buffers a thread holds. Internal to the tracer (trace.cpp).
#pragma once

#include <cstdint>

#include "trace/trace.h"

namespace zarena_trace {

// Grants the registry the tracer's private finish/detach.
class TracerAccess {
 public:
  static void finish_at_exit(Tracer& t) { (void)t.finish(true); }
  static void detach(Tracer& t, Tracer::ThreadBuffer* b) { t.detach(b); }
};

// A new tracer; installs the atexit handler on first use.
void registry_add(uint64_t id, Tracer* t);
// Called first thing by the tracer's destructor: after it, no thread-exit hook and no
// exit flush touches the tracer.
void registry_remove(uint64_t id);
// The calling thread attached buffer b of tracer id: at thread exit it is detached (if
// the tracer is still registered). Forgets entries of tracers already gone.
void registry_note_thread_buffer(uint64_t id, Tracer::ThreadBuffer* b);
// The calling thread's buffer of tracer id, or null when it has none.
Tracer::ThreadBuffer* registry_find_thread_buffer(uint64_t id);

}  // namespace zarena_trace
