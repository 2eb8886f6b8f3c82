"""Exceptions for failed zarena calls: one class per status code.

Argument checks done in Python, before any call, raise the built-in TypeError,
ValueError or OverflowError instead (see zarena._args); they carry no status code.
"""

import re

from . import constants as C

# The diagnosis in a failure message: "... verdict=<name>; fix: <one sentence>" (zarena.h,
# failing overflows). The fix runs to the end of the message, or to a following
# "; key=value" part or "verdict=" should the library ever put one after it (a fix may
# itself name a setting: "set ZARENA_CAPACITY_BYTES=4GiB").
_VERDICT_RE = re.compile(r"\bverdict=([A-Za-z][A-Za-z0-9_]*)")
_FIX_RE = re.compile(r"\b[Ff]ix:\s*(.*?)\s*(?:(?:;\s*[A-Za-z_][A-Za-z0-9_.]*=|\s+verdict=).*)?$",
                     re.S)


def parse_diagnosis(message):
    """(verdict, advice) from a zarena failure message; each None when absent.

    The one place that reads the verdict out of a message: ZarenaError.verdict/.advice
    come from here."""
    if not message:
        return None, None
    verdict = _VERDICT_RE.search(message)
    fix = _FIX_RE.search(message)
    advice = fix.group(1).strip() if fix else None
    return (verdict.group(1) if verdict else None), (advice or None)


class ZarenaError(Exception):
    """A zarena call failed. status: the ZARENA_E_* code; detail: zarena_last_error();
    function: the C function; verdict and advice: the diagnosis the message carries (a
    failing overflow names its verdict, e.g. "never_reset", and the fix), else None."""

    status = None

    def __init__(self, status, detail, function="", status_text=""):
        self.status = status
        self.detail = detail
        self.function = function
        self.verdict, self.advice = parse_diagnosis(detail)
        text = f"{status_text or 'status'} ({status}): {detail}"
        super().__init__(f"{function}: {text}" if function else text)


class InvalidArgumentError(ZarenaError, ValueError):
    status = C.E_INVALID_ARGUMENT


class OutOfMemoryError(ZarenaError, MemoryError):
    status = C.E_OUT_OF_MEMORY


class NotOwnedError(ZarenaError):
    status = C.E_NOT_OWNED


class DoubleFreeError(ZarenaError):
    status = C.E_DOUBLE_FREE


class StaleError(ZarenaError):
    status = C.E_STALE


class CaptureUnsafeError(ZarenaError):
    status = C.E_CAPTURE_UNSAFE


class NoDeviceError(ZarenaError):
    status = C.E_NO_DEVICE


class BackendError(ZarenaError):
    status = C.E_BACKEND


class UnsupportedError(ZarenaError):
    status = C.E_UNSUPPORTED


class InternalError(ZarenaError):
    status = C.E_INTERNAL


class NotPinnedError(ZarenaError):
    status = C.E_NOT_PINNED


class TooManyPinsError(ZarenaError):
    status = C.E_TOO_MANY_PINS


class ClosedError(ZarenaError, ValueError):
    """A call on an Arena after close() (a ValueError, as for a closed file)."""
    status = C.E_CLOSED


_ERRORS = {c.status: c for c in (
    InvalidArgumentError, OutOfMemoryError, NotOwnedError, DoubleFreeError, StaleError,
    CaptureUnsafeError, NoDeviceError, BackendError, UnsupportedError, InternalError,
    NotPinnedError, TooManyPinsError, ClosedError)}


def error_class(status):
    """The exception class for a status code (ZarenaError for codes newer than this package)."""
    return _ERRORS.get(status, ZarenaError)
