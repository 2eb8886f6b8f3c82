package zarena

/*
#include "log_queue.h"
#include "shim.h"

static inline shim_result shim_set_logger(int on, int32_t min_level) {
  return shim_wrap(zarena_set_log_callback(on ? zarena_go_logq_callback : NULL, NULL, min_level));
}
*/
import "C"

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Level is a ZARENA_LOG_* level.
type Level int32

const (
	LevelTrace Level = 0
	LevelDebug Level = 1
	LevelInfo  Level = 2
	LevelWarn  Level = 3
	LevelError Level = 4
	LevelOff   Level = 5
)

func (l Level) String() string {
	switch l {
	case LevelTrace:
		return "trace"
	case LevelDebug:
		return "debug"
	case LevelInfo:
		return "info"
	case LevelWarn:
		return "warn"
	case LevelError:
		return "error"
	case LevelOff:
		return "off"
	}
	return "invalid"
}

// Field is one typed field of a Record. Value is an int64, uint64, float64, string or
// bool, as the library typed it.
type Field struct {
	Key   string
	Value any
}

// Record is one log record of the library, copied out of C: it may be kept.
type Record struct {
	Time    time.Time
	Level   Level
	Event   string // "arena.config", "arena.first_overflow", "arena.reset_cadence", ...
	Message string // one human-readable line
	Arena   string // the arena's name; "" for process-wide records
	Fields  []Field
	// ArenaID is the arena's identity (Arena.ID): unique in the process, never reused;
	// 0 for process-wide records (and with a library older than 1.1's records).
	ArenaID uint64
}

// Handle is the *Arena the record is about, to route records to their pool, while that
// arena is open: nil for process-wide records, and once the arena's Close returned (Close
// delivers the records emitted before it, its "arena.destroy" included, so a logger that
// asks during delivery finds the arena for each of them; "arena.released", which can come
// later, finds nil). The record does not hold the arena: a logger that keeps records
// keeps no arena alive, and the finalizer of an arena the program forgot to Close still
// runs. Safe from any goroutine.
func (r Record) Handle() *Arena { return arenas.lookup(r.ArenaID) }

// Field returns the value of the field named key.
func (r Record) Field(key string) (any, bool) {
	for _, f := range r.Fields {
		if f.Key == key {
			return f.Value, true
		}
	}
	return nil, false
}

// String formats the record as one line, like the library's stderr sink.
func (r Record) String() string {
	var b strings.Builder
	b.WriteString(r.Event)
	if r.Arena != "" {
		fmt.Fprintf(&b, " [%s]", r.Arena)
	}
	b.WriteString(": ")
	b.WriteString(r.Message)
	for _, f := range r.Fields {
		if s, ok := f.Value.(string); ok && strings.ContainsAny(s, " \t\"") {
			fmt.Fprintf(&b, " %s=%q", f.Key, s)
		} else {
			fmt.Fprintf(&b, " %s=%v", f.Key, f.Value)
		}
	}
	return b.String()
}

// logSink routes the library's records to the Go logger. The C callback only queues
// (log_queue.c); one dispatcher goroutine, running while a logger is set, takes the
// records out of the queue and calls the logger. So the logger never runs inside a
// binding call: Alloc and Free stay single cgo calls with nothing on top.
type logSink struct {
	fn       atomic.Pointer[func(Record)]
	minLevel atomic.Int32 // the library's threshold, once SetLogger set it
	minSet   atomic.Bool
	panics   atomic.Uint64
	setMu    sync.Mutex    // serialises SetLogger calls; guards done
	done     chan struct{} // closed when the dispatcher returns; nil when none runs
}

var sink logSink

// SetLogger routes the library's log records at minLevel and above to fn (LevelOff:
// none); fn nil restores the library's stderr sink, with minLevel as its threshold. It
// is the one way to set a logger: SlogLogger adapts an slog.Handler
// (SetLogger(SlogLogger(h))); LevelFromEnv is the level ZARENA_LOG_LEVEL asks for.
//
// Delivery is asynchronous: the library's callback copies each record into a bounded
// queue and returns, and fn runs on one goroutine of this package, one record at a
// time, in the order the records were emitted, never inside a C call (a record emitted
// inside a successful Alloc arrives after Alloc returned). A call that fails waits,
// before it returns its error, until the records emitted so far were delivered, so the
// diagnosis is in the logger before the program can act on the error (log.Fatal).
// Records from threads Go did not create arrive the same way. FlushLogs waits for what
// was emitted so far; SetLogger and Close flush too. When fn falls behind and the queue
// (4096 records) is full, newer records are dropped and counted (LogsDropped); a
// "go.log_dropped" record with the count in its "dropped" field takes their place.
//
// fn must not call Alloc, Free, Reset, MarkStepBoundary, New, Close, SetLogger or
// FlushLogs, nor any call that may fail in the library (those that wait for the logger
// would wait for themselves); Stats and Epoch are fine. A panic in fn is recovered and
// reported on stderr; the record is lost, the program goes on.
func SetLogger(fn func(Record), minLevel Level) error {
	if err := ready(); err != nil {
		return err
	}
	sink.setMu.Lock()
	defer sink.setMu.Unlock()
	if fn == nil {
		r := C.shim_set_logger(0, C.int32_t(minLevel))
		if err := errorFrom(r.status, r.err); err != nil {
			return err
		}
		sink.minLevel.Store(int32(minLevel))
		sink.minSet.Store(true)
		sink.stopDispatcher()
		sink.fn.Store(nil)
		return nil
	}
	started := sink.done == nil
	if started {
		sink.startDispatcher()
	} else {
		C.zarena_go_logq_flush() // what was emitted before goes to the previous logger
	}
	prev := sink.fn.Swap(&fn)
	r := C.shim_set_logger(1, C.int32_t(minLevel))
	if err := errorFrom(r.status, r.err); err != nil {
		if started {
			sink.stopDispatcher()
		}
		sink.fn.Store(prev)
		return err
	}
	sink.minLevel.Store(int32(minLevel))
	sink.minSet.Store(true)
	return nil
}

// FlushLogs waits until every record emitted before the call (by the library on any
// thread, or by the binding) was handed to the Go logger, or counted as dropped. It
// returns at once when no logger is set. The logger itself must not call it.
// zarena_log_flush first: records of overflows that succeeded come from the library's
// reporter thread.
func FlushLogs() {
	C.zarena_log_flush()
	C.zarena_go_logq_flush()
}

// LoggerPanics counts records lost because the Go logger panicked.
func LoggerPanics() uint64 { return sink.panics.Load() }

// LogsDropped counts records lost because the Go logger fell behind and the queue
// was full (or a record could not be copied).
func LogsDropped() uint64 { return uint64(C.zarena_go_logq_dropped()) }

// startDispatcher opens the queue and starts the goroutine that drains it. Called
// with setMu held, before the library's callback points at the queue.
func (s *logSink) startDispatcher() {
	C.zarena_go_logq_open()
	s.done = make(chan struct{})
	go s.dispatch(s.done)
}

// stopDispatcher delivers what was queued and ends the dispatcher. Called with setMu
// held, after the library's callback was taken away: records from callbacks still in
// flight are discarded, as they were when a removed logger was never called.
func (s *logSink) stopDispatcher() {
	if s.done == nil {
		return
	}
	C.zarena_go_logq_close()
	C.zarena_go_logq_flush()
	C.zarena_go_logq_stop()
	<-s.done
	s.done = nil
}

// dispatch is the dispatcher goroutine: it blocks in C until records are queued,
// copies them into Go memory and calls the logger, never from inside a C call.
func (s *logSink) dispatch(done chan struct{}) {
	defer close(done)
	var recs []Record
	for {
		b := C.zarena_go_logq_next() // also releases the previous batch, now delivered
		if b.stop != 0 {
			return
		}
		recs = recs[:0]
		for q := b.head; q != nil; q = q.next {
			t := time.Unix(0, int64(q.unix_ns))
			if q.dropped_before > 0 {
				recs = append(recs, droppedRecord(uint64(q.dropped_before), t))
			}
			recs = append(recs, recordFromC(&q.rec, t))
		}
		if b.tail_drops > 0 {
			recs = append(recs, droppedRecord(uint64(b.tail_drops), time.Now()))
		}
		for i := range recs {
			s.deliver(recs[i])
			recs[i] = Record{}
		}
	}
}

// droppedRecord stands in, in the delivery order, for records the queue dropped.
func droppedRecord(n uint64, t time.Time) Record {
	return Record{
		Time:  t,
		Level: LevelWarn,
		Event: "go.log_dropped",
		Message: fmt.Sprintf("%d log records were dropped: the Go logger fell behind and "+
			"the queue of %d records was full", n, uint32(C.zarena_go_logq_capacity())),
		Fields: []Field{{Key: "dropped", Value: n}},
	}
}

// LevelFromEnv is the level ZARENA_LOG_LEVEL names (trace, debug, info, warn, error,
// off), info when it is unset or unknown: the stderr sink's threshold, and what
// SetLogger(fn, LevelFromEnv()) keeps.
func LevelFromEnv() Level {
	switch strings.ToLower(os.Getenv("ZARENA_LOG_LEVEL")) {
	case "trace":
		return LevelTrace
	case "debug":
		return LevelDebug
	case "warn", "warning":
		return LevelWarn
	case "error":
		return LevelError
	case "off":
		return LevelOff
	}
	return LevelInfo
}

// threshold is the level below which records are not delivered.
func threshold() Level {
	if sink.minSet.Load() {
		return Level(sink.minLevel.Load())
	}
	return LevelFromEnv()
}

// loggerPanicOut holds a writerBox: where a panicking logger is reported (unset:
// stderr); the tests capture it so that a passing run prints nothing.
var loggerPanicOut atomic.Value

type writerBox struct{ w io.Writer }

func panicOut() io.Writer {
	if b, ok := loggerPanicOut.Load().(writerBox); ok && b.w != nil {
		return b.w
	}
	return os.Stderr
}

// deliver hands a record to the Go logger, recovering its panic.
func (s *logSink) deliver(r Record) {
	fnp := s.fn.Load()
	if fnp == nil || r.Level < threshold() {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			s.panics.Add(1)
			fmt.Fprintf(panicOut(), "zarena: the Go log callback panicked (%v); record lost: %s\n",
				p, r.Event)
		}
	}()
	(*fnp)(r)
}

// emitGo reports a record that originates in the binding (not the C library; its
// fields are not carried): through the queue, behind the library's records emitted
// before it, when a Go logger is set, else to stderr like the library's default sink.
func emitGo(r Record) {
	lvl := threshold()
	if r.Level < lvl || lvl >= LevelOff {
		return
	}
	if sink.fn.Load() != nil {
		ev, msg, arena := C.CString(r.Event), C.CString(r.Message), C.CString(r.Arena)
		queued := C.zarena_go_logq_push(C.int32_t(r.Level), ev, msg, arena, C.uint64_t(r.ArenaID))
		C.free(unsafe.Pointer(ev))
		C.free(unsafe.Pointer(msg))
		C.free(unsafe.Pointer(arena))
		if queued != 0 {
			return
		}
	}
	fmt.Fprintf(os.Stderr, "%s zarena %s %s\n", time.Now().Format("2006-01-02T15:04:05.000"),
		r.Level, r.String())
}

// recordFromC copies a C record into Go memory.
func recordFromC(rec *C.zarena_log_record, t time.Time) Record {
	r := Record{
		Time:    t,
		Level:   Level(rec.level),
		Event:   C.GoString(rec.event),
		Message: C.GoString(rec.message),
		Arena:   C.GoString(rec.arena_name),
		ArenaID: uint64(rec.arena_id),
	}
	n := int(rec.field_count)
	if n == 0 || rec.fields == nil {
		return r
	}
	cf := unsafeFields(rec.fields, n)
	r.Fields = make([]Field, n)
	for i := range cf {
		f := &cf[i]
		var v any
		switch f.kind {
		case C.ZARENA_FIELD_INT:
			v = int64(f.i)
		case C.ZARENA_FIELD_UINT:
			v = uint64(f.i)
		case C.ZARENA_FIELD_DOUBLE:
			v = float64(f.f)
		case C.ZARENA_FIELD_BOOL:
			v = f.i != 0
		case C.ZARENA_FIELD_STRING:
			v = C.GoString(f.s)
		default: // a kind newer than this package: keep what can be kept
			v = int64(f.i)
		}
		r.Fields[i] = Field{Key: C.GoString(f.key), Value: v}
	}
	return r
}

func unsafeFields(p *C.zarena_log_field, n int) []C.zarena_log_field {
	return unsafe.Slice(p, n)
}

// setLogQueueCapacity changes the queue bound (tests make it small to see drops) and
// returns the previous one.
func setLogQueueCapacity(n uint32) uint32 {
	prev := uint32(C.zarena_go_logq_capacity())
	C.zarena_go_logq_set_capacity(C.uint32_t(n))
	return prev
}
