"""What the 1.1 calls hand back: a Block from alloc_ex, LiveBlock rows from live_blocks()."""

import dataclasses
import json
from typing import Optional

from . import constants as C


@dataclasses.dataclass(frozen=True)
class Block:
    """One allocation (zarena_block): ptr (an int address; None for a size-0 request), the
    epoch it belongs to (pass it to free_at), size (the request rounded up to the
    alignment), flags (BLOCK_OVERFLOW, BLOCK_REUSED) and tag (0 = untagged)."""

    ptr: Optional[int]
    epoch: int
    size: int
    flags: int
    tag: int

    @property
    def overflow(self):
        return bool(self.flags & C.BLOCK_OVERFLOW)

    @property
    def reused(self):
        return bool(self.flags & C.BLOCK_REUSED)

    @classmethod
    def _from_c(cls, b):
        return cls(b.ptr, b.epoch, b.size, b.flags, b.tag)

    def __repr__(self):
        where = "overflow" if self.overflow else "region"
        ptr = f"{self.ptr:#x}" if self.ptr else "NULL"
        tag = f", tag={self.tag}" if self.tag else ""
        return (f"Block({ptr}, size={self.size}, epoch={self.epoch}, {where}"
                f"{', reused' if self.reused else ''}{tag})")


@dataclasses.dataclass(frozen=True)
class LiveBlock:
    """One row of zarena_for_each_live_block; the fields (and to_dict()'s keys, and the JSON
    dump's) are zarena_live_block's: ptr, size, epoch, pins, tag, flags (LIVE_OVERFLOW,
    LIVE_PERSISTENT, LIVE_FREED), reserved."""

    ptr: int
    size: int
    epoch: int
    pins: int
    tag: int
    flags: int
    reserved: int = 0

    @property
    def overflow(self):
        return bool(self.flags & C.LIVE_OVERFLOW)

    @property
    def persistent(self):
        return bool(self.flags & C.LIVE_PERSISTENT)

    @property
    def freed(self):
        """Freed while pinned: it goes at its last unpin."""
        return bool(self.flags & C.LIVE_FREED)

    def to_dict(self):
        return dataclasses.asdict(self)

    def __repr__(self):
        flags = [n for n, on in (("overflow", self.overflow), ("persistent", self.persistent),
                                 ("freed", self.freed)) if on]
        extra = "".join(f", {f}" for f in flags)
        return (f"LiveBlock({self.ptr:#x}, size={self.size}, epoch={self.epoch}, "
                f"pins={self.pins}, tag={self.tag}{extra})")

    @classmethod
    def _from_c(cls, b):
        return cls(b.ptr or 0, b.size, b.epoch, b.pins, b.tag, b.flags, b.reserved)


def live_blocks_json(blocks, **dump_args):
    """A JSON array of the blocks, one object each with zarena_live_block's keys."""
    return json.dumps([b.to_dict() for b in blocks], **dump_args)
