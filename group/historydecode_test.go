package group

import (
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"testing"
)

// TestHistoryValueClaimingHugeSize loads a stored history value of a few
// bytes whose compressed block claims a gigabyte once decoded, as a damaged
// store could hold: it is refused as corrupt without the decoder first
// allocating what the value claims (the claim of such a header goes up to
// 4 GiB, which can be more than the node may allocate at all).
func TestHistoryValueClaimingHugeSize(t *testing.T) {
	v := binary.BigEndian.AppendUint16(nil, historyValueS2)
	v = binary.AppendUvarint(v, 1<<30)
	v = append(v, 0, 1, 2, 3)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := decodeEvent("g", 1, v)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("decodeEvent: %v, want ErrCorruptRecord", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Fatalf("a %d-byte value made the decoder allocate %d bytes", len(v), n)
	}
	if !strings.Contains(err.Error(), "1073741824") {
		t.Errorf("the error does not say what the value claims: %v", err)
	}
}

// allocated is the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestStoredCountsAllocateLittle loads stored values whose count of
// members (a group image) or of topics (a consumer group's assignment)
// claims one entry per byte left, more than those bytes can hold: they are
// refused as corrupt without first allocating room for every entry
// claimed, which cost 256 bytes a claimed member, a store of damaged
// values many times its size.
func TestStoredCountsAllocateLittle(t *testing.T) {
	const left = 64 << 10
	img := encodeGroupImage(&groupImage{protocolType: "consumer", protocol: "range"})
	img = img[:len(img)-1] // the member count: none
	img = binary.AppendUvarint(img, left)
	img = append(img, make([]byte, left)...)
	var err error
	if n := allocated(func() { _, err = decodeGroupImage(img) }); n > 4*uint64(len(img)) {
		t.Errorf("a %d-byte group image claiming %d members allocated %d bytes", len(img), left, n)
	}
	if !errors.Is(err, ErrCorruptRecord) {
		t.Errorf("group image: %v, want ErrCorruptRecord", err)
	}

	set := binary.AppendUvarint(nil, left)
	set = append(set, make([]byte, left)...)
	r := reader{b: set}
	if n := allocated(func() { r.set(nil) }); n > 4*uint64(len(set)) {
		t.Errorf("a %d-byte assignment claiming %d topics allocated %d bytes", len(set), left, n)
	}
	if !r.err {
		t.Error("the assignment was read")
	}
}
