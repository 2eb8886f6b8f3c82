"""ctypes mirrors of zarena.h's structs (same field order and types) and their printing."""

import ctypes

from . import _args


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
    ]

    def set_field(self, key, value):
        """Sets one field by name after checking the value against the C type."""
        types = dict(self._fields_)
        if key not in types or key == "struct_size":
            raise TypeError(f"unknown zarena_config field {key!r}")
        ctype = types[key]
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


STATS_FIELDS = (
    "capacity_bytes used_bytes floor_bytes high_water_bytes epoch epoch_allocs "
    "epoch_max_alloc_bytes epoch_high_water_bytes hits misses reuses resets free_list_len "
    "free_list_bytes largest_free_block_bytes live_allocs stale_frees invalid_frees "
    "overflow_allocs overflow_live_bytes overflow_peak_bytes overflow_max_latency_ns "
    "overflow_reclaimed overflow_failures"
).split()

# What repr() shows: the figures that answer "how full, how much churn, anything wrong".
_REPR_FIELDS = ("capacity_bytes", "used_bytes", "high_water_bytes", "floor_bytes", "epoch",
                "live_allocs", "hits", "reuses", "misses", "overflow_live_bytes",
                "overflow_peak_bytes", "invalid_frees", "stale_frees")


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
    sizes in B/KiB/MiB/GiB; to_dict() has the exact numbers."""

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
    ]


LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(LogRecordC))

# Sizes of the C structs on LP64 as compiled from zarena.h 1.0; a mismatch means this
# package and the header disagree, and every call would corrupt memory.
EXPECTED_SIZES = {Config: 88, Stats: 200, LogField: 40, LogRecordC: 48}
if ctypes.sizeof(ctypes.c_void_p) == 8:
    for _t, _n in EXPECTED_SIZES.items():
        if ctypes.sizeof(_t) != _n:
            raise ImportError(f"zarena: {_t.__name__} is {ctypes.sizeof(_t)} bytes, "
                              f"zarena.h says {_n}")
