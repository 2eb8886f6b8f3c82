"""Range checks for every integer that crosses into C.

ctypes converts a Python int to a C integer by truncation: 2**64 + 16 becomes 16 and -256
becomes 2**64 - 256, and a str passed where a pointer is expected becomes the address of
its buffer. Every argument is therefore checked here, before any call, so that a bad one
raises and changes nothing:

- TypeError: not an integer (bool, float, str, bytes, None where no NULL is allowed);
  objects with __index__ (numpy integers) are integers;
- ValueError: a negative value where C takes an unsigned integer (sizes, counts, flags,
  pointers);
- OverflowError: a value that does not fit the C type (2**64 for a uint64_t, 2**31 for
  an int32_t).
"""

import ctypes
import operator

POINTER_BITS = ctypes.sizeof(ctypes.c_void_p) * 8


def _integer(value, what):
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an integer, not bool")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an integer, not {type(value).__name__}") from None


def unsigned(value, what, bits=64):
    """value as a C uint<bits>_t, or raise."""
    n = _integer(value, what)
    if n < 0:
        raise ValueError(f"{what} must be >= 0, got {n}")
    if n >> bits:
        raise OverflowError(f"{what} = {n} does not fit in {bits} bits (max {(1 << bits) - 1})")
    return n


def signed(value, what, bits=32):
    """value as a C int<bits>_t, or raise."""
    n = _integer(value, what)
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if not lo <= n <= hi:
        raise OverflowError(f"{what} = {n} does not fit in a signed {bits}-bit integer "
                            f"[{lo}, {hi}]")
    return n


def pointer(value, what):
    """An address (int) or None (NULL) as a C pointer value, or raise."""
    if value is None:
        return None
    return unsigned(value, what, POINTER_BITS) or None


def switch(value, what):
    """An on/off argument as a C int 0 or 1: a bool, or the integers 0 and 1."""
    if isinstance(value, bool):
        return int(value)
    n = _integer(value, what)
    if n not in (0, 1):
        raise ValueError(f"{what} must be True/False (or 0/1), got {n}")
    return n


def text(value, what):
    """A str or bytes argument as NUL-free bytes for a C string, or raise."""
    if isinstance(value, str):
        value = value.encode()
    if not isinstance(value, bytes):
        raise TypeError(f"{what} must be str or bytes, not {type(value).__name__}")
    if b"\0" in value:
        raise ValueError(f"{what} contains a NUL character")
    return value
