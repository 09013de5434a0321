package group

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

// A group image decodes to what was encoded, its strings and byte slices
// cut from shared copies without overlapping (appending to one never
// changes another), empty byte fields nil; every truncation is an error.
func TestGroupImageRoundTrip(t *testing.T) {
	img := &groupImage{protocolType: "consumer", generation: 7, protocol: "range", leader: "m-2",
		stateTime: time.UnixMilli(1_700_000_000_123),
		members: []memberImage{
			{id: "m-1", instanceID: "", clientID: "c1", clientHost: "/10.0.0.1", session: 45 * time.Second,
				rebalance: time.Minute, metadata: []byte("meta-1"), assignment: nil},
			{id: "m-2", instanceID: "i-2", clientID: "c2", clientHost: "/10.0.0.2", session: 10 * time.Second,
				rebalance: -time.Millisecond, metadata: []byte{}, assignment: []byte("assign-2")},
			{id: "m-3", clientID: "c3", metadata: []byte("meta-3"), assignment: []byte("assign-3")},
		}}
	v := encodeGroupImage(img)
	got, err := decodeGroupImage(v)
	if err != nil {
		t.Fatal(err)
	}
	want := *img
	want.members = append([]memberImage(nil), img.members...)
	want.members[1].metadata = nil // empty byte fields decode as nil
	if !reflect.DeepEqual(got, &want) {
		t.Fatalf("decoded\n%+v\nwant\n%+v", got, &want)
	}
	for i := range v { // the decoded image does not alias the stored value
		v[i] ^= 0xff
	}
	if !reflect.DeepEqual(got, &want) {
		t.Fatal("the decoded image changed with the stored value")
	}
	got.members[0].metadata = append(got.members[0].metadata, "more"...)
	if string(got.members[1].assignment) != "assign-2" || string(got.members[2].metadata) != "meta-3" {
		t.Fatal("appending to one member's metadata changed another field")
	}
	v = encodeGroupImage(img)
	for cut := 0; cut < len(v); cut++ {
		if _, err := decodeGroupImage(v[:cut]); !errors.Is(err, ErrCorruptRecord) {
			t.Fatalf("truncated to %d of %d bytes: %v", cut, len(v), err)
		}
	}
}
