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
