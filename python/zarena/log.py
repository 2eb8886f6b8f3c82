"""zarena's log records in Python: a callback, and a bridge to the logging module."""

import ctypes
import logging

from . import _args
from . import constants as C
from ._library import check, library
from ._structs import LOG_FN, LogRecordC

_ARENA_ID_END = LogRecordC.arena_id.offset + ctypes.sizeof(ctypes.c_uint64)


class LogRecord:
    """A copy of one zarena_log_record (the C record is valid only during the callback)."""

    __slots__ = ("level", "event", "message", "arena_name", "fields", "arena_id")

    def __init__(self, level, event, message, arena_name, fields, arena_id=0):
        self.level, self.event, self.message = level, event, message
        self.arena_name, self.fields = arena_name, fields
        # Arena.id of the arena the record is about (unique in the process, never reused);
        # 0 for process-wide records and with a library whose records lack it.
        self.arena_id = arena_id

    def __repr__(self):
        return f"LogRecord({self.level}, {self.event!r}, {self.message!r}, {self.fields!r})"


def _text(b):
    return b.decode("utf-8", "replace") if b is not None else ""


def _copy_record(rec):
    fields = {}
    for i in range(rec.field_count):
        f = rec.fields[i]
        if f.kind == C.FIELD_STRING:
            v = _text(f.s)
        elif f.kind == C.FIELD_UINT:
            v = f.i & 0xFFFFFFFFFFFFFFFF
        elif f.kind == C.FIELD_DOUBLE:
            v = f.f
        elif f.kind == C.FIELD_BOOL:
            v = bool(f.i)
        else:
            v = f.i
        fields[_text(f.key)] = v
    arena_id = rec.arena_id if rec.struct_size >= _ARENA_ID_END else 0
    return LogRecord(rec.level, _text(rec.event), _text(rec.message), _text(rec.arena_name),
                     fields, arena_id)


# Every trampoline handed to C stays referenced for the life of the process: after a
# replacement, calls already in flight to the previous one may still run (zarena.h).
_trampolines = []
callback_errors = []  # exceptions raised by Python log callbacks (they cannot cross C)


def set_log_callback(fn, min_level=C.LOG_INFO):
    """Routes zarena's log records to fn(LogRecord); None restores the stderr sink.

    fn may run on any thread, also on threads Python did not create. It must not call
    zarena functions other than stats/epoch/last_error/version (zarena.h). Exceptions it
    raises are kept in zarena.callback_errors instead of propagating into C.
    """
    min_level = _args.signed(min_level, "min_level", 32)
    lib = library()
    if fn is None:
        check(lib.zarena_set_log_callback(LOG_FN(), None, min_level), "zarena_set_log_callback")
        return

    def trampoline(_user_data, rec_ptr):
        try:
            fn(_copy_record(rec_ptr.contents))
        except BaseException as e:  # noqa: BLE001 - nothing may unwind into C
            callback_errors.append(e)

    cb = LOG_FN(trampoline)
    _trampolines.append(cb)
    check(lib.zarena_set_log_callback(cb, None, min_level), "zarena_set_log_callback")


# zarena level -> logging level. TRACE has no logging name; it is logged at 5.
LEVELS = {C.LOG_TRACE: 5, C.LOG_DEBUG: logging.DEBUG, C.LOG_INFO: logging.INFO,
          C.LOG_WARN: logging.WARNING, C.LOG_ERROR: logging.ERROR}


def zarena_level_for(python_level):
    """The lowest zarena level that a logger at python_level would emit (LOG_OFF if none)."""
    for zl in sorted(LEVELS):
        if LEVELS[zl] >= python_level:
            return zl
    return C.LOG_OFF


def log_to_logging(logger=None, min_level=None):
    """Sends zarena's records to a logging.Logger (default: logging.getLogger("zarena")).

    Each record is logged at the matching level (TRACE at 5) with the message
    "<event> [<arena>] <message>" and these attributes on the logging.LogRecord (the
    `extra` of the call): zarena_event, zarena_arena, zarena_fields (a dict of every field)
    and zarena_<key> for each field (e.g. record.zarena_verdict on arena.first_overflow).
    min_level defaults to what the logger's effective level lets through when this is
    called; call again after changing the level. Replaces any callback set before;
    set_log_callback(None) restores the stderr sink. Returns the logger.
    """
    if logger is None:
        logger = logging.getLogger("zarena")
    if min_level is None:
        min_level = zarena_level_for(logger.getEffectiveLevel())

    def emit(rec):
        extra = {"zarena_event": rec.event, "zarena_arena": rec.arena_name,
                 "zarena_fields": dict(rec.fields)}
        for key, value in rec.fields.items():
            extra["zarena_" + key] = value
        where = f" [{rec.arena_name}]" if rec.arena_name else ""
        logger.log(LEVELS.get(rec.level, logging.ERROR), "%s%s %s", rec.event, where,
                   rec.message, extra=extra)

    set_log_callback(emit, min_level)
    return logger
