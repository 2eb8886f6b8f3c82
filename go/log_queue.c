/* Bounded record queue between the library's log callback and the Go dispatcher; see
 * log_queue.h. When the queue is full the NEWEST record is dropped: the early records
 * (arena.config, the first-overflow verdict) are the diagnosis, later ones mostly repeat
 * it, and dropping at the tail needs no free under the lock. Drops are counted and the
 * dispatcher reports them in order, as a synthetic "go.log_dropped" record. */
#include "log_queue.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LOGQ_DEFAULT_CAPACITY 4096

static struct {
  pthread_mutex_t mu;
  pthread_cond_t ready; /* records, drops or stop pending: wakes the dispatcher */
  pthread_cond_t done;  /* delivered advanced or the dispatcher left: wakes flushers */
  logq_record* head;
  logq_record* tail;
  uint32_t len;
  uint32_t capacity;
  uint64_t pending_drops; /* dropped since the last queued record */
  logq_record* inflight;  /* the batch the dispatcher is delivering */
  uint64_t inflight_weight;
  uint64_t offered;   /* records accepted or dropped while accepting */
  uint64_t delivered; /* of those, delivered or reported dropped */
  uint64_t dropped_total;
  int accepting;
  int dispatching;
  int stop;
} q = {PTHREAD_MUTEX_INITIALIZER,
       PTHREAD_COND_INITIALIZER,
       PTHREAD_COND_INITIALIZER,
       NULL,
       NULL,
       0,
       LOGQ_DEFAULT_CAPACITY,
       0,
       NULL,
       0,
       0,
       0,
       0,
       0,
       0,
       0};

static const char* nz(const char* s) { return s != NULL ? s : ""; }

static int64_t now_unix_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static char* put_string(char** cursor, const char* s) {
  size_t n = strlen(s) + 1;
  char* out = *cursor;
  memcpy(out, s, n);
  *cursor += n;
  return out;
}

/* One malloc for the record, its fields and all their strings. NULL when out of memory. */
static logq_record* copy_record(const zarena_log_record* rec) {
  uint32_t nf = rec->fields != NULL ? rec->field_count : 0;
  size_t size = sizeof(logq_record) + (size_t)nf * sizeof(zarena_log_field);
  size += strlen(nz(rec->event)) + strlen(nz(rec->message)) + strlen(nz(rec->arena_name)) + 3;
  for (uint32_t i = 0; i < nf; ++i) {
    size += strlen(nz(rec->fields[i].key)) + 1;
    if (rec->fields[i].kind == ZARENA_FIELD_STRING) size += strlen(nz(rec->fields[i].s)) + 1;
  }
  logq_record* c = (logq_record*)malloc(size);
  if (c == NULL) return NULL;
  c->next = NULL;
  c->unix_ns = now_unix_ns();
  c->dropped_before = 0;
  /* A library older than this header delivers a shorter record: its tail stays zero. */
  memset(&c->rec, 0, sizeof c->rec);
  memcpy(&c->rec, rec, rec->struct_size < sizeof c->rec ? rec->struct_size : sizeof c->rec);
  c->rec.struct_size = sizeof(zarena_log_record);
  zarena_log_field* fields = (zarena_log_field*)(c + 1);
  char* cursor = (char*)(fields + nf);
  c->rec.event = put_string(&cursor, nz(rec->event));
  c->rec.message = put_string(&cursor, nz(rec->message));
  c->rec.arena_name = put_string(&cursor, nz(rec->arena_name));
  for (uint32_t i = 0; i < nf; ++i) {
    fields[i] = rec->fields[i];
    fields[i].key = put_string(&cursor, nz(rec->fields[i].key));
    fields[i].s = rec->fields[i].kind == ZARENA_FIELD_STRING
                      ? put_string(&cursor, nz(rec->fields[i].s))
                      : NULL;
  }
  c->rec.fields = nf > 0 ? fields : NULL;
  c->rec.field_count = nf;
  return c;
}

static int enqueue(const zarena_log_record* rec) {
  /* Copy before locking: the emitting thread may be an allocating one. */
  logq_record* c = copy_record(rec);
  pthread_mutex_lock(&q.mu);
  if (!q.accepting) {
    pthread_mutex_unlock(&q.mu);
    free(c);
    return 0;
  }
  ++q.offered;
  if (c == NULL || q.len >= q.capacity) {
    ++q.pending_drops;
    ++q.dropped_total;
  } else {
    c->dropped_before = q.pending_drops;
    q.pending_drops = 0;
    if (q.tail != NULL) {
      q.tail->next = c;
    } else {
      q.head = c;
    }
    q.tail = c;
    ++q.len;
    c = NULL;
  }
  pthread_cond_signal(&q.ready);
  pthread_mutex_unlock(&q.mu);
  free(c); /* the copy of a dropped record */
  return 1;
}

void zarena_go_logq_callback(void* user_data, const zarena_log_record* rec) {
  (void)user_data;
  if (rec != NULL) enqueue(rec);
}

int32_t zarena_go_logq_push(int32_t level, const char* event, const char* message,
                            const char* arena, uint64_t arena_id) {
  zarena_log_record rec;
  memset(&rec, 0, sizeof rec);
  rec.struct_size = sizeof rec;
  rec.level = level;
  rec.event = event;
  rec.message = message;
  rec.arena_name = arena;
  rec.arena_id = arena_id;
  return enqueue(&rec);
}

void zarena_go_logq_open(void) {
  pthread_mutex_lock(&q.mu);
  q.accepting = 1;
  q.dispatching = 1;
  q.stop = 0;
  pthread_mutex_unlock(&q.mu);
}

void zarena_go_logq_close(void) {
  pthread_mutex_lock(&q.mu);
  q.accepting = 0;
  pthread_mutex_unlock(&q.mu);
}

void zarena_go_logq_stop(void) {
  pthread_mutex_lock(&q.mu);
  q.stop = 1;
  pthread_cond_signal(&q.ready);
  pthread_mutex_unlock(&q.mu);
}

static void free_list(logq_record* r) {
  while (r != NULL) {
    logq_record* next = r->next;
    free(r);
    r = next;
  }
}

logq_batch zarena_go_logq_next(void) {
  logq_batch b;
  memset(&b, 0, sizeof b);
  pthread_mutex_lock(&q.mu);
  logq_record* done = q.inflight;
  q.inflight = NULL;
  q.delivered += q.inflight_weight;
  q.inflight_weight = 0;
  pthread_cond_broadcast(&q.done);
  pthread_mutex_unlock(&q.mu);
  free_list(done);

  pthread_mutex_lock(&q.mu);
  while (q.head == NULL && q.pending_drops == 0 && !q.stop) pthread_cond_wait(&q.ready, &q.mu);
  if (q.head == NULL && q.pending_drops == 0) { /* stopped, and everything delivered */
    q.stop = 0;
    q.dispatching = 0;
    pthread_cond_broadcast(&q.done);
    b.stop = 1;
  } else {
    uint64_t weight = q.pending_drops;
    for (logq_record* r = q.head; r != NULL; r = r->next) weight += 1 + r->dropped_before;
    b.head = q.head;
    b.tail_drops = q.pending_drops;
    q.inflight = q.head;
    q.inflight_weight = weight;
    q.head = q.tail = NULL;
    q.len = 0;
    q.pending_drops = 0;
  }
  pthread_mutex_unlock(&q.mu);
  return b;
}

void zarena_go_logq_flush(void) {
  pthread_mutex_lock(&q.mu);
  uint64_t target = q.offered;
  while (q.dispatching && q.delivered < target) pthread_cond_wait(&q.done, &q.mu);
  pthread_mutex_unlock(&q.mu);
}

void zarena_go_logq_set_capacity(uint32_t capacity) {
  pthread_mutex_lock(&q.mu);
  q.capacity = capacity > 0 ? capacity : 1;
  pthread_mutex_unlock(&q.mu);
}

uint32_t zarena_go_logq_capacity(void) {
  pthread_mutex_lock(&q.mu);
  uint32_t c = q.capacity;
  pthread_mutex_unlock(&q.mu);
  return c;
}

uint64_t zarena_go_logq_dropped(void) {
  pthread_mutex_lock(&q.mu);
  uint64_t d = q.dropped_total;
  pthread_mutex_unlock(&q.mu);
  return d;
}
