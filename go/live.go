package zarena

/*
#include "shim.h"

static inline const char* shim_tag_name(uint32_t id) { return zarena_tag_name(id); }
*/
import "C"

import (
	"encoding/json"
	"fmt"
	"io"
	"unsafe"
)

// Live blocks and tags (zarena.h, 1.1).

// Tag names what a block is for ("matmul.grad"): registered once, process-wide, then
// passed to AllocTagged as a small integer. 0 is "untagged".
type Tag uint32

// RegisterTag registers name (up to 63 bytes are kept) and returns its tag; registering
// the same name again returns the same tag. ErrInvalidArgument for an empty name,
// ErrOutOfMemory past 65535 tags.
func RegisterTag(name string) (Tag, error) {
	if err := ready(); err != nil {
		return 0, err
	}
	if name == "" {
		return 0, &Error{Status: StatusInvalidArgument, Message: "RegisterTag: empty name"}
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	r := C.shim_tag_register(cname)
	if err := callError(r.r.status, r.r.err); err != nil {
		return 0, err
	}
	return Tag(r.id), nil
}

// Name is the tag's registered name ("" for 0 and unknown tags).
func (t Tag) Name() string {
	if t == 0 || ready() != nil {
		return ""
	}
	return C.GoString(C.shim_tag_name(C.uint32_t(t)))
}

// LiveBlockFlags describe a live block (ZARENA_LIVE_*).
type LiveBlockFlags uint32

const (
	LiveOverflow   LiveBlockFlags = 0x1 // an overflow block
	LivePersistent LiveBlockFlags = 0x2 // below the floor (or kept by a step boundary)
	LiveFreed      LiveBlockFlags = 0x4 // freed while pinned: goes at its last Unpin
)

// LiveBlock is one block that is live now.
type LiveBlock struct {
	Ptr   DevicePtr
	Size  uint64 // aligned size
	Epoch uint64 // the epoch it was handed out in
	Pins  uint32
	Tag   Tag
	Flags LiveBlockFlags
}

// LiveBlocks lists the live blocks, region blocks in address order then overflow blocks,
// from one snapshot taken after the queued frees were applied (other goroutines may
// allocate meanwhile). One cgo call; O(live blocks).
func (a *Arena) LiveBlocks() ([]LiveBlock, error) {
	blocks, _, _, err := a.liveBlocks()
	return blocks, err
}

func (a *Arena) liveBlocks() ([]LiveBlock, uint64, DevicePtr, error) {
	var r C.shim_blocks_result
	err := a.whole("LiveBlocks", func(h C.uintptr_t) C.shim_result {
		r = C.shim_live_blocks(h)
		return r.r
	})
	if err != nil {
		return nil, 0, 0, err
	}
	defer C.free(unsafe.Pointer(r.items))
	out := make([]LiveBlock, int(r.len))
	if r.len > 0 {
		for i, cb := range unsafe.Slice(r.items, int(r.len)) {
			out[i] = LiveBlock{Ptr: DevicePtr(cb.ptr), Size: uint64(cb.size), Epoch: uint64(cb.epoch),
				Pins: uint32(cb.pins), Tag: Tag(cb.tag), Flags: LiveBlockFlags(cb.flags)}
		}
	}
	return out, uint64(r.epoch), DevicePtr(r.base), nil
}

// FormatLiveBlocks formats the live blocks from one snapshot, taken after the queued
// frees were applied, as the library does (zarena_format_live_blocks): FormatText, a title
// line (count, bytes, epoch) then one line per block (address, offset or "overflow",
// size, epoch, pins, flags, tag); FormatJSON, one JSON object, the shape
// WriteLiveBlocksJSON writes: {"arena", "epoch", "count", "bytes", "blocks": [{"address",
// "offset", "size", "epoch", "pins", "pinned", "overflow", "persistent", "freed",
// "tag_id", "tag"}, ...]}. Safe while other goroutines allocate; O(live blocks).
// ErrClosed after Close.
func (a *Arena) FormatLiveBlocks(f Format) (string, error) {
	return a.format("FormatLiveBlocks", 1, f)
}

// liveBlockJSON and liveBlocksJSON are the dump's shape, the same keys as the C
// library's zarena_format_live_blocks (and Python's) use.
type liveBlockJSON struct {
	Address    string  `json:"address"`
	Offset     *uint64 `json:"offset"` // null for overflow blocks
	Size       uint64  `json:"size"`
	Epoch      uint64  `json:"epoch"`
	Pins       uint32  `json:"pins"`
	Pinned     bool    `json:"pinned"`
	Overflow   bool    `json:"overflow"`
	Persistent bool    `json:"persistent"`
	Freed      bool    `json:"freed"`
	TagID      uint32  `json:"tag_id"`
	Tag        *string `json:"tag"` // null when untagged
}

type liveBlocksJSON struct {
	Arena  string          `json:"arena"`
	Epoch  uint64          `json:"epoch"`
	Count  int             `json:"count"`
	Bytes  uint64          `json:"bytes"`
	Blocks []liveBlockJSON `json:"blocks"`
}

// WriteLiveBlocksJSON writes the live blocks as one JSON object: {"arena", "epoch",
// "count", "bytes", "blocks": [{"address": "0x...", "offset" (null for overflow), "size",
// "epoch", "pins", "pinned", "overflow", "persistent", "freed", "tag_id", "tag" (name or
// null)}, ...]}, the keys zarena_format_live_blocks uses.
func (a *Arena) WriteLiveBlocksJSON(w io.Writer) error {
	blocks, epoch, base, err := a.liveBlocks()
	if err != nil {
		return err
	}
	doc := liveBlocksJSON{Arena: a.name, Epoch: epoch, Count: len(blocks),
		Blocks: make([]liveBlockJSON, len(blocks))}
	for i, b := range blocks {
		doc.Bytes += b.Size
		j := liveBlockJSON{
			Address: fmt.Sprintf("%#x", uintptr(b.Ptr)), Size: b.Size, Epoch: b.Epoch,
			Pins: b.Pins, Pinned: b.Pins > 0, Overflow: b.Flags&LiveOverflow != 0,
			Persistent: b.Flags&LivePersistent != 0, Freed: b.Flags&LiveFreed != 0,
			TagID: uint32(b.Tag),
		}
		if !j.Overflow {
			off := uint64(b.Ptr - base)
			j.Offset = &off
		}
		if b.Tag != 0 {
			name := b.Tag.Name()
			j.Tag = &name
		}
		doc.Blocks[i] = j
	}
	return json.NewEncoder(w).Encode(doc)
}
