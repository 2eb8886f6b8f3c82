package zarena

/*
#include "shim.h"

static inline const char* shim_tag_name(uint32_t id) { return zarena_tag_name(id); }
*/
import "C"

import "unsafe"

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

// LiveBlockFlags describe a live block (ZARENA_LIVE_*; the bits: block_flags_gen.go).
type LiveBlockFlags uint32

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
	return wholeValue(a, "LiveBlocks", func(h C.uintptr_t) (C.shim_blocks_result, C.shim_result) {
		r := C.shim_live_blocks(h)
		return r, r.r
	}, liveBlocksFromC)
}

// liveBlocksFromC copies the blocks and frees the C array.
func liveBlocksFromC(r *C.shim_blocks_result) []LiveBlock {
	defer C.free(unsafe.Pointer(r.items))
	out := make([]LiveBlock, int(r.len))
	if r.len > 0 {
		for i, cb := range unsafe.Slice(r.items, int(r.len)) {
			out[i] = LiveBlock{Ptr: DevicePtr(cb.ptr), Size: uint64(cb.size), Epoch: uint64(cb.epoch),
				Pins: uint32(cb.pins), Tag: Tag(cb.tag), Flags: LiveBlockFlags(cb.flags)}
		}
	}
	return out
}

// FormatLiveBlocks formats the live blocks from one snapshot, taken after the queued
// frees were applied, as the library does (zarena_format_live_blocks): FormatText, a title
// line (count, bytes, epoch) then one line per block (address, offset or "overflow",
// size, epoch, pins, flags, tag); FormatJSON, one JSON object: {"arena", "epoch",
// "count", "bytes", "blocks": [{"address": "0x...", "offset" (null for overflow), "size",
// "epoch", "pins", "pinned", "overflow", "persistent", "freed", "tag_id", "tag" (name or
// null)}, ...]}. Safe while other goroutines allocate; O(live blocks).
// ErrClosed after Close.
func (a *Arena) FormatLiveBlocks(f Format) (string, error) {
	return a.format("FormatLiveBlocks", 1, f)
}
