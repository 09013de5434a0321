package sticky

import (
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/cohort-dev/cohort/consumer/assign"
	"github.com/cohort-dev/cohort/consumer/internal/mutate"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kmsgUserData is the reference reading of sticky user data: kmsg's.
func kmsgUserData(b []byte) ([]assign.TopicPartitions, int32, bool) {
	if len(b) == 0 {
		return nil, -1, true
	}
	var meta kmsg.StickyMemberMetadata
	if err := meta.ReadFrom(b); err != nil {
		return nil, -1, false
	}
	var owned []assign.TopicPartitions
	for _, a := range meta.CurrentAssignment {
		tp := assign.TopicPartitions{Topic: a.Topic}
		if len(a.Partitions) > 0 {
			tp.Partitions = a.Partitions
		}
		owned = append(owned, tp)
	}
	return owned, meta.Generation, true
}

func sameAsKmsg(t *testing.T, b []byte) {
	t.Helper()
	want, wantGen, ok := kmsgUserData(b)
	got, gen, err := decodeUserData(b)
	if (err == nil) != ok {
		t.Fatalf("%x: walker error %v, kmsg ok %v", b, err, ok)
	}
	if ok && (!reflect.DeepEqual(got, want) || gen != wantGen) {
		t.Fatalf("%x: walker %v gen %d, kmsg %v gen %d", b, got, gen, want, wantGen)
	}
	if g2, err2 := walkUserData(b, nil); (err2 == nil) != ok || ok && g2 != wantGen {
		t.Fatalf("%x: validation pass alone gives gen %d err %v", b, g2, err2)
	}
}

// TestWalkUserDataMatchesKmsg checks that the in-place reader accepts what
// kmsg accepts and reads the same partitions and generation: every
// truncation and byte corruption of version 0 and 1 user data, negative and
// oversized lengths, and trailing bytes.
func TestWalkUserDataMatchesKmsg(t *testing.T) {
	owned := []assign.TopicPartitions{{Topic: "orders", Partitions: []int32{0, 7}}, {Topic: "x"}, {Topic: "pay", Partitions: []int32{3}}}
	var inputs [][]byte
	for _, gen := range []int32{-1, 5} {
		inputs = append(inputs, mutate.Variants(encodeUserData(owned, gen))...)
	}
	neg := binary.BigEndian.AppendUint32(nil, 0xffffffff)
	inputs = append(inputs, neg, binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 0xffffffff), 9), encodeUserData(nil, 3))
	for _, b := range inputs {
		sameAsKmsg(t, b)
	}
}

func FuzzWalkUserData(f *testing.F) {
	f.Add(encodeUserData([]assign.TopicPartitions{{Topic: "a", Partitions: []int32{1, 2}}}, 4))
	f.Add(encodeUserData(nil, -1))
	f.Fuzz(sameAsKmsg)
}
