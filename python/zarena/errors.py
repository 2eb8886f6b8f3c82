"""Exceptions for failed zarena calls: one class per status code.

Argument checks done in Python, before any call, raise the built-in TypeError,
ValueError or OverflowError instead (see zarena._args); they carry no status code.
"""

from . import constants as C


class ZarenaError(Exception):
    """A zarena call failed. status: the ZARENA_E_* code; detail: zarena_last_error()."""

    status = None

    def __init__(self, status, detail, function="", status_text=""):
        self.status = status
        self.detail = detail
        self.function = function
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


_ERRORS = {c.status: c for c in (
    InvalidArgumentError, OutOfMemoryError, NotOwnedError, DoubleFreeError, StaleError,
    CaptureUnsafeError, NoDeviceError, BackendError, UnsupportedError, InternalError)}


def error_class(status):
    """The exception class for a status code (ZarenaError for codes newer than this package)."""
    return _ERRORS.get(status, ZarenaError)
