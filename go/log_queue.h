/* The C half of the binding's log delivery (log.go is the Go half). The library calls
 * zarena_go_logq_callback on whatever thread emits a record, possibly inside zarena_alloc;
 * it copies the record into a bounded queue and returns without touching Go. One Go
 * goroutine drains the queue with zarena_go_logq_next, a blocking cgo call, and runs the Go
 * logger outside any library call. So no binding call ever re-enters Go (there is no
 * //export in the package), and records from threads Go did not create need nothing
 * from the Go runtime. */
#ifndef ZARENA_GO_LOG_QUEUE_H
#define ZARENA_GO_LOG_QUEUE_H

#include <stdint.h>
#include <zarena/zarena.h>

/* One queued record: a deep copy, with every string and the fields in the same
 * allocation, so rec's pointers stay valid until zarena_go_logq_next frees the batch. */
typedef struct logq_record {
  struct logq_record* next;
  int64_t unix_ns;         /* CLOCK_REALTIME when the library emitted it */
  uint64_t dropped_before; /* records dropped (queue full) just before this one */
  zarena_log_record rec;
} logq_record;

typedef struct {
  logq_record* head;   /* oldest first; owned by the queue, valid until the next call */
  uint64_t tail_drops; /* records dropped after the last one of head */
  int32_t stop;        /* the dispatcher is to return (zarena_go_logq_stop) */
} logq_batch;

/* The zarena_log_fn the binding registers (user_data unused). */
void zarena_go_logq_callback(void* user_data, const zarena_log_record* rec);

/* Queues a record that the binding itself originates (no fields; arena_id as
 * zarena_arena_id, 0 for none). 0 when the queue is not accepting (no Go logger), so the
 * caller can fall back to stderr. */
int32_t zarena_go_logq_push(int32_t level, const char* event, const char* message,
                            const char* arena, uint64_t arena_id);

/* Starts accepting records for a dispatcher the caller is about to run. */
void zarena_go_logq_open(void);
/* Stops accepting: records that arrive later (callbacks still in flight after the
 * library's callback was replaced) are discarded, as a removed logger would. */
void zarena_go_logq_close(void);
/* Makes zarena_go_logq_next return stop once the queue is empty. */
void zarena_go_logq_stop(void);

/* Dispatcher only: frees the previous batch and counts it delivered, then blocks until
 * records, drops or stop are pending and takes them all. */
logq_batch zarena_go_logq_next(void);

/* Blocks until everything offered to the queue before the call was delivered (or
 * counted as dropped and reported). Returns at once when no dispatcher runs. */
void zarena_go_logq_flush(void);

/* Queue bound (records waiting, not counting the batch being delivered); at least 1. */
void zarena_go_logq_set_capacity(uint32_t capacity);
uint32_t zarena_go_logq_capacity(void);
/* Records dropped because the queue was full or a copy could not be allocated. */
uint64_t zarena_go_logq_dropped(void);

#endif
