"""ctypes mirrors of zarena.h's structs (same field order and types) and their printing.

The layouts are checked against the C compiler's (sizeof, offsetof of every field) by
tests/python/test_layout.py, which compiles a probe of zarena.h in the suite."""

import ctypes
import difflib

from . import _args
from ._stats_fields import STATS_FIELDS


class Config(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("backend", ctypes.c_int32),
        ("device", ctypes.c_int32),
        ("capacity_bytes", ctypes.c_uint64),
        ("alignment", ctypes.c_uint64),
        ("overflow_policy", ctypes.c_int32),
        ("overflow_retain_bytes", ctypes.c_uint64),
        ("overflow_limit_bytes", ctypes.c_uint64),
        ("stream", ctypes.c_void_p),
        ("flags", ctypes.c_uint32),
        ("name", ctypes.c_char_p),
        ("overflow_slow_ns", ctypes.c_uint64),
        # 1.1
        ("poison_word", ctypes.c_uint32),
        ("reserved0", ctypes.c_uint32),
        ("commit_chunk_bytes", ctypes.c_uint64),
        ("trim_keep_bytes", ctypes.c_uint64),
        ("trace_file", ctypes.c_char_p),
    ]

    @classmethod
    def field_type(cls, key):
        """The ctypes type of a settable field; TypeError naming the field meant for a
        near miss (capacity -> capacity_bytes, policy -> overflow_policy)."""
        types = dict(cls._fields_)
        if key in types and key != "struct_size":
            return types[key]
        names = [n for n, _ in cls._fields_ if n not in ("struct_size", "reserved0")]
        near = [n for n in names if isinstance(key, str) and
                (n.startswith(key + "_") or n.endswith("_" + key))]
        near += [n for n in difflib.get_close_matches(str(key), names, n=2) if n not in near]
        hint = f"; did you mean {' or '.join(near[:2])}?" if near else ""
        raise TypeError(f"unknown zarena_config field {key!r}{hint}")

    def set_field(self, key, value):
        """Sets one field by name after checking the value against the C type."""
        ctype = self.field_type(key)
        what = f"zarena_config.{key}"
        if ctype is ctypes.c_char_p:
            if isinstance(value, str):
                value = value.encode()
            if value is not None and not isinstance(value, bytes):
                raise TypeError(f"{what} must be str, bytes or None, not {type(value).__name__}")
            if value is not None and b"\0" in value:
                raise ValueError(f"{what} contains a NUL character")
        elif ctype is ctypes.c_void_p:
            value = _args.pointer(value, what)
        elif ctype is ctypes.c_int32:
            value = _args.signed(value, what, 32)
        else:
            value = _args.unsigned(value, what, ctypes.sizeof(ctype) * 8)
        setattr(self, key, value)


# What repr() shows: the figures that answer "how full, how much churn, anything wrong".
_REPR_FIELDS = ("capacity_bytes", "used_bytes", "high_water_bytes", "floor_bytes", "epoch",
                "live_allocs", "hits", "reuses", "misses", "overflow_live_bytes",
                "overflow_peak_bytes", "pinned_bytes", "invalid_frees", "stale_frees")


def format_bytes(n):
    """1536 -> '1.50 KiB', 4 << 20 -> '4 MiB', 100 -> '100 B'."""
    value, unit = float(n), "B"
    for next_unit in ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if value < 1024:
            break
        value, unit = value / 1024, next_unit
    if unit == "B":
        return f"{int(n)} B"
    return f"{int(value)} {unit}" if value == int(value) else f"{value:.2f} {unit}"


def format_ns(n):
    """Nanoseconds for people: 950 -> '950 ns', 1_500_000 -> '1.50 ms'."""
    for unit, scale in (("s", 10**9), ("ms", 10**6), ("us", 10**3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} ns"


def _human(name, value):
    if name.endswith("_bytes"):
        return format_bytes(value)
    if name.endswith("_ns"):
        return format_ns(value)
    return str(value)


class Stats(ctypes.Structure):
    """zarena_stats. repr() is one line of the key figures; str() is every field, one a line,
    sizes in B/KiB/MiB/GiB; to_dict() has the exact numbers.

    Versioned by struct_size: the library writes exactly sizeof(Stats) bytes of this
    module's layout. A newer library with more fields at the end leaves them out (the unknown
    tail is never written here); an older one zeroes the fields it does not know."""

    _fields_ = [("struct_size", ctypes.c_uint32)] + [(n, ctypes.c_uint64) for n in STATS_FIELDS]

    def to_dict(self):
        return {n: getattr(self, n) for n in STATS_FIELDS}

    def __repr__(self):
        parts = []
        for name in _REPR_FIELDS:
            label = name[:-len("_bytes")] if name.endswith("_bytes") else name
            parts.append(f"{label}={_human(name, getattr(self, name))}")
        return "Stats(" + ", ".join(parts) + ")"

    def __str__(self):
        width = max(len(n) for n in STATS_FIELDS)
        lines = []
        for name in STATS_FIELDS:
            value = getattr(self, name)
            text = _human(name, value)
            if text not in (str(value), f"{value} B", f"{value} ns"):
                text += f" ({value})"  # the exact figure behind a rounded one
            lines.append(f"{name:<{width}}  {text}")
        return "\n".join(lines)


class LogField(ctypes.Structure):
    _fields_ = [
        ("key", ctypes.c_char_p),
        ("kind", ctypes.c_int32),
        ("i", ctypes.c_int64),
        ("f", ctypes.c_double),
        ("s", ctypes.c_char_p),
    ]


class LogRecordC(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("level", ctypes.c_int32),
        ("event", ctypes.c_char_p),
        ("message", ctypes.c_char_p),
        ("arena_name", ctypes.c_char_p),
        ("fields", ctypes.POINTER(LogField)),
        ("field_count", ctypes.c_uint32),
        # after the 1.1 layout: read only when struct_size covers them
        ("arena", ctypes.c_void_p),
        ("arena_id", ctypes.c_uint64),
    ]


LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(LogRecordC))


class BlockC(ctypes.Structure):
    """zarena_block (what zarena_alloc_ex writes)."""

    _fields_ = [
        ("ptr", ctypes.c_void_p),
        ("epoch", ctypes.c_uint64),
        ("size", ctypes.c_uint64),
        ("flags", ctypes.c_uint32),
        ("tag", ctypes.c_uint32),
    ]


class FreeItem(ctypes.Structure):
    """zarena_free_item (zarena_free_batch)."""

    _fields_ = [("ptr", ctypes.c_void_p), ("epoch", ctypes.c_uint64)]


class Region(ctypes.Structure):
    """zarena_region (zarena_region_info). to_dict() has every field; base is an int."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("base", ctypes.c_void_p),
        ("capacity_bytes", ctypes.c_uint64),
        ("top_bytes", ctypes.c_uint64),
        ("floor_bytes", ctypes.c_uint64),
        ("committed_bytes", ctypes.c_uint64),
        ("managed", ctypes.c_uint32),
        ("expandable", ctypes.c_uint32),
    ]

    def to_dict(self):
        d = {n: getattr(self, n) for n, _ in self._fields_ if n != "struct_size"}
        d["base"] = d["base"] or 0
        d["managed"], d["expandable"] = bool(d["managed"]), bool(d["expandable"])
        return d

    def __repr__(self):
        d = self.to_dict()
        return (f"Region(base={d['base']:#x}, capacity={format_bytes(d['capacity_bytes'])}, "
                f"top={format_bytes(d['top_bytes'])}, floor={format_bytes(d['floor_bytes'])}, "
                f"committed={format_bytes(d['committed_bytes'])}, managed={d['managed']}, "
                f"expandable={d['expandable']})")


class LiveBlockC(ctypes.Structure):
    """zarena_live_block (zarena_for_each_live_block)."""

    _fields_ = [
        ("ptr", ctypes.c_void_p),
        ("size", ctypes.c_uint64),
        ("epoch", ctypes.c_uint64),
        ("pins", ctypes.c_uint32),
        ("tag", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
    ]


class DiagnosisC(ctypes.Structure):
    """zarena_diagnosis (zarena_diagnose)."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("overflowed", ctypes.c_uint32),
        ("verdict", ctypes.c_char_p),
        ("advice", ctypes.c_char_p),
        ("cause", ctypes.c_char_p),
    ] + [(n, ctypes.c_uint64) for n in ("epoch", "resets", "steps")] + [
        ("steps_explicit", ctypes.c_uint32),
        ("warned", ctypes.c_uint32),
    ] + [(n, ctypes.c_uint64) for n in (
        "kept_bytes steps_to_full capacity_bytes top_bytes floor_bytes live_bytes "
        "overflow_live_bytes epoch_allocs epoch_peak_bytes prior_epochs prior_peak_bytes "
        "prior_allocs overflow_epochs needed_bytes requested_bytes").split()]

    def to_dict(self):
        """Every field; the sentences as str, the flags as bool."""
        d = {}
        for name, _ in self._fields_:
            if name == "struct_size":
                continue
            value = getattr(self, name)
            if isinstance(value, bytes):
                value = value.decode("utf-8", "replace")
            elif value is None:
                value = ""
            elif name in ("overflowed", "steps_explicit", "warned"):
                value = bool(value)
            d[name] = value
        return d


LIVE_BLOCK_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(LiveBlockC))

# The ctypes mirror of each C struct, by C name (tests/python/test_layout.py checks them all).
# zarena_overflow_allocator's functions (zarena_set_overflow_allocator, C ABI).
OVERFLOW_ALLOC_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_uint64,
                                     ctypes.c_uint64, ctypes.c_void_p,
                                     ctypes.POINTER(ctypes.c_void_p))
OVERFLOW_FREE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64,
                                    ctypes.c_void_p)


class OverflowAllocatorC(ctypes.Structure):
    """zarena_overflow_allocator (zarena_set_overflow_allocator): the layout, for programs
    that install an allocator through ctypes themselves."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
        ("ctx", ctypes.c_void_p),
        ("allocate", OVERFLOW_ALLOC_FN),
        ("deallocate", OVERFLOW_FREE_FN),
        ("name", ctypes.c_char_p),
    ]


class GraphInfo(ctypes.Structure):
    """zarena_graph_info (zarena/zarena_graph.h, experimental): Arena.graph_info()."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("ready", ctypes.c_uint32),
        ("capturing", ctypes.c_uint32),
        ("graphs", ctypes.c_uint32),
        ("period", ctypes.c_uint32),
        ("phase", ctypes.c_uint32),
        ("captures", ctypes.c_uint64),
        ("failed_captures", ctypes.c_uint64),
        ("refused_allocs", ctypes.c_uint64),
        ("replays", ctypes.c_uint64),
        ("refused_replays", ctypes.c_uint64),
        ("stream_joins", ctypes.c_uint64),
        ("zone_bytes", ctypes.c_uint64),
    ]

    def to_dict(self):
        d = {n: getattr(self, n) for n, _ in self._fields_ if n != "struct_size"}
        d["ready"], d["capturing"] = bool(d["ready"]), bool(d["capturing"])
        return d

    def __repr__(self):
        return "GraphInfo(" + ", ".join(f"{k}={v}" for k, v in self.to_dict().items()) + ")"


C_STRUCTS = {"zarena_config": Config, "zarena_stats": Stats, "zarena_log_field": LogField,
             "zarena_log_record": LogRecordC, "zarena_block": BlockC,
             "zarena_free_item": FreeItem, "zarena_region": Region,
             "zarena_live_block": LiveBlockC, "zarena_diagnosis": DiagnosisC,
             "zarena_overflow_allocator": OverflowAllocatorC, "zarena_graph_info": GraphInfo}
