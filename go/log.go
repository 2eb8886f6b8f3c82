package zarena

/*
#include "zgo.h"

// The //export'ed Go trampoline (log_export.go). Declared here because a file with
// //export may not define C functions in its preamble.
extern void zarenaGoLog(uintptr_t user_data, zarena_log_record* rec);

// zarena_log_fn's signature around the trampoline: the handle travels as an integer so
// that no Go pointer is ever stored in C.
static void zgo_log_adapter(void* user_data, const zarena_log_record* rec) {
  zarenaGoLog((uintptr_t)user_data, (zarena_log_record*)rec);
}

static inline zgo_result zgo_set_logger(uintptr_t handle, int32_t min_level) {
  return zgo_wrap(zarena_set_log_callback(handle != 0 ? zgo_log_adapter : NULL,
                                          (void*)handle, min_level));
}
*/
import "C"

import (
	"fmt"
	"os"
	"runtime/cgo"
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
}

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

// logSink is what the single C callback registration points at (through a
// runtime/cgo.Handle created once and never deleted, so a record still in flight
// while the logger changes never meets a deleted handle).
type logSink struct {
	fn       atomic.Pointer[func(Record)]
	minLevel atomic.Int32 // the library's threshold, once SetLoggerLevel set it
	minSet   atomic.Bool
	panics   atomic.Uint64
	setMu    sync.Mutex // serialises SetLogger calls
	handle   cgo.Handle
	initted  bool
}

var sink logSink

// SetLogger routes the library's log records to fn, from the level in
// ZARENA_LOG_LEVEL (default info). fn nil restores the library's stderr sink. fn may be
// called on any thread (also threads Go did not create) and from several at once; it
// must not call Alloc, Free, Reset, MarkStepBoundary, New, Close or SetLogger. A panic
// in fn is recovered and reported on stderr; the record is lost, the program goes on.
func SetLogger(fn func(Record)) error {
	return SetLoggerLevel(fn, levelFromEnv())
}

// SetLoggerLevel is SetLogger with an explicit minimum level (LevelOff: none).
func SetLoggerLevel(fn func(Record), minLevel Level) error {
	sink.setMu.Lock()
	defer sink.setMu.Unlock()
	if fn == nil {
		r := C.zgo_set_logger(0, C.int32_t(minLevel))
		if err := errorFrom(r.status, r.err); err != nil {
			return err
		}
		sink.fn.Store(nil)
		sink.minLevel.Store(int32(minLevel))
		sink.minSet.Store(true)
		return nil
	}
	if !sink.initted {
		sink.handle = cgo.NewHandle(&sink)
		sink.initted = true
	}
	prev := sink.fn.Swap(&fn)
	r := C.zgo_set_logger(C.uintptr_t(sink.handle), C.int32_t(minLevel))
	if err := errorFrom(r.status, r.err); err != nil {
		sink.fn.Store(prev)
		return err
	}
	sink.minLevel.Store(int32(minLevel))
	sink.minSet.Store(true)
	return nil
}

// LoggerPanics counts records lost because the Go logger panicked.
func LoggerPanics() uint64 { return sink.panics.Load() }

func levelFromEnv() Level {
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

// deliver hands a record to the Go logger, recovering its panic.
func (s *logSink) deliver(rec func() Record) {
	fnp := s.fn.Load()
	if fnp == nil {
		return
	}
	r := rec()
	defer func() {
		if p := recover(); p != nil {
			s.panics.Add(1)
			fmt.Fprintf(os.Stderr, "zarena: the Go log callback panicked (%v); record lost: %s\n",
				p, r.Event)
		}
	}()
	(*fnp)(r)
}

// emitGo reports a record that originates in the binding (not the C library): to the
// Go logger when one is set, else to stderr like the library's default sink.
func emitGo(r Record) {
	r.Time = time.Now()
	threshold := levelFromEnv()
	if sink.minSet.Load() {
		threshold = Level(sink.minLevel.Load())
	}
	if r.Level < threshold || threshold >= LevelOff {
		return
	}
	if sink.fn.Load() != nil {
		sink.deliver(func() Record { return r })
		return
	}
	fmt.Fprintf(os.Stderr, "%s zarena %s %s\n", r.Time.Format("2006-01-02T15:04:05.000"),
		r.Level, r.String())
}

// recordFromC copies a C record into Go memory.
func recordFromC(rec *C.zarena_log_record) Record {
	r := Record{
		Time:    time.Now(),
		Level:   Level(rec.level),
		Event:   C.GoString(rec.event),
		Message: C.GoString(rec.message),
		Arena:   C.GoString(rec.arena_name),
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
