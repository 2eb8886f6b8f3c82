package zarena

import (
	"errors"
	"fmt"
	"testing"
)

func TestTags(t *testing.T) {
	name := "matmul.grad." + t.Name()
	tag, err := RegisterTag(name)
	if err != nil || tag == 0 {
		t.Fatalf("RegisterTag: %v, %v", tag, err)
	}
	again, err := RegisterTag(name)
	if err != nil || again != tag {
		t.Fatalf("registering again: %v, %v (want %v)", again, err, tag)
	}
	if tag.Name() != name || Tag(0).Name() != "" || Tag(65535).Name() != "" {
		t.Fatalf("names: %q %q %q", tag.Name(), Tag(0).Name(), Tag(65535).Name())
	}
	if _, err := RegisterTag(""); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("empty name: %v", err)
	}
}

func TestLiveBlocksAndJSON(t *testing.T) {
	a := newHost(t, Config{CapacityBytes: miB, OverflowPolicy: OverflowSync})
	tag, err := RegisterTag("act." + t.Name())
	if err != nil {
		t.Fatal(err)
	}
	w := mustAlloc(t, a, 64*kiB)
	if err := a.MarkStepBoundary(); err != nil {
		t.Fatal(err)
	}
	act, err := a.AllocTagged(4*kiB, tag)
	if err != nil || act.Tag != tag {
		t.Fatalf("AllocTagged: %+v, %v", act, err)
	}
	if err := a.Pin(act.Ptr); err != nil {
		t.Fatal(err)
	}
	dead := mustAlloc(t, a, 4*kiB)
	over := mustAlloc(t, a, 960*kiB)     // overflow
	if err := a.Free(dead); err != nil { // queued: LiveBlocks applies it first
		t.Fatal(err)
	}
	blocks, err := a.LiveBlocks()
	if err != nil {
		t.Fatal(err)
	}
	want := []LiveBlock{
		{Ptr: w, Size: 64 * kiB, Epoch: 0, Flags: LivePersistent},
		{Ptr: act.Ptr, Size: 4 * kiB, Epoch: 0, Pins: 1, Tag: tag},
		{Ptr: over, Size: 960 * kiB, Epoch: 0, Flags: LiveOverflow},
	}
	if fmt.Sprint(blocks) != fmt.Sprint(want) {
		t.Fatalf("LiveBlocks:\n got %+v\nwant %+v", blocks, want)
	}
	doc, text := liveBlocksDump(t, a)
	if doc.Arena != t.Name() || doc.Count != 3 || doc.Bytes != (64+4+960)*kiB || len(doc.Blocks) != 3 {
		t.Fatalf("dump: %s", text)
	}
	b1 := doc.Blocks[1]
	if b1.Address != fmt.Sprintf("%#x", uintptr(act.Ptr)) || b1.Offset == nil ||
		*b1.Offset != 64*kiB || !b1.Pinned || b1.Tag == nil || *b1.Tag != "act."+t.Name() ||
		b1.TagID != uint32(tag) || b1.Persistent || b1.Freed {
		t.Fatalf("pinned block in the dump: %s", text)
	}
	if !doc.Blocks[0].Persistent || doc.Blocks[0].Tag != nil || doc.Blocks[2].Offset != nil ||
		!doc.Blocks[2].Overflow {
		t.Fatalf("dump: %s", text)
	}
}
