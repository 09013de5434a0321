package consumer

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/consumer/assign"
	"github.com/cohort-dev/cohort/consumer/internal/mutate"
)

// sameAsDecodeSubscription fails unless the MemberDecoder accepts exactly
// what DecodeSubscription accepts and yields the same member and version.
func sameAsDecodeSubscription(t *testing.T, d *MemberDecoder, b []byte) {
	t.Helper()
	orig := bytes.Clone(b)
	s, errRef := DecodeSubscription(b)
	m, v, err := d.Member(b, "m", "i")
	if !bytes.Equal(orig, b) {
		t.Fatal("input modified")
	}
	if (err == nil) != (errRef == nil) {
		t.Fatalf("%x: MemberDecoder error %v, DecodeSubscription error %v", b, err, errRef)
	}
	if err != nil {
		return
	}
	if want := s.Member("m", "i"); !reflect.DeepEqual(m, want) || v != s.Version {
		t.Fatalf("%x: MemberDecoder gave v%d %+v, DecodeSubscription v%d %+v", b, v, m, s.Version, want)
	}
}

func FuzzMemberDecoder(f *testing.F) {
	for v := int16(0); v <= MaxVersion; v++ {
		b, _ := fullSubscription(v).Encode()
		f.Add(b)
		f.Add(append(b, 9, 9))
	}
	f.Add(kafkaGoSubscription([]string{"a"}, nil))
	f.Add(kafkaGoSubscription(nil, []byte{}))
	f.Fuzz(func(t *testing.T, b []byte) {
		sameAsDecodeSubscription(t, NewMemberDecoder(), b)
	})
}

// TestMemberDecoderMatchesDecodeSubscription runs the seeds, the malformed
// shapes of TestMalformedBytesGiveErrors and every truncation and
// single-byte corruption of each version's encoding through both decoders.
func TestMemberDecoderMatchesDecodeSubscription(t *testing.T) {
	var inputs [][]byte
	for v := int16(0); v <= MaxVersion; v++ {
		b, _ := fullSubscription(v).Encode()
		inputs = append(inputs, mutate.Variants(b)...)
		future := bytes.Clone(b)
		binary.BigEndian.PutUint16(future, 9)
		inputs = append(inputs, future)
	}
	inputs = append(inputs, kafkaGoSubscription([]string{"a", "bb"}, nil), kafkaGoSubscription([]string{"a"}, []byte{7}))
	// One decoder for all of them, as the leader uses one per group.
	d := NewMemberDecoder()
	for _, b := range inputs {
		sameAsDecodeSubscription(t, d, b)
	}
}

// TestMemberDecoderShares checks what the decoder shares between members:
// equal topic lists share one slice, names are one string each, user data
// aliases the input, and partitions of different members do not overlap.
func TestMemberDecoderShares(t *testing.T) {
	d := NewMemberDecoder()
	var ms []assign.Member
	for i := range 3 {
		s := Subscription{Version: 3, Topics: []string{"a", "b"}, UserData: []byte{0xab, byte(i)}, Generation: 5,
			Owned: []assign.TopicPartitions{{Topic: "b", Partitions: []int32{int32(i), 10 + int32(i)}}}}
		if i == 2 {
			s.Topics = []string{"b"}
		}
		raw, err := s.Encode()
		if err != nil {
			t.Fatal(err)
		}
		m, _, err := d.Member(raw, fmt.Sprint(i), "")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(m.UserData, []byte{0xab, byte(i)}) {
			t.Fatalf("member %d user data %v", i, m.UserData)
		}
		at := bytes.Index(raw, []byte{0, 0, 0, 2, 0xab}) + 4
		raw[at] = 0xcd
		if m.UserData[0] != 0xcd {
			t.Fatal("user data copied, want it aliased to the input")
		}
		ms = append(ms, m)
	}
	if &ms[0].Topics[0] != &ms[1].Topics[0] {
		t.Error("equal topic lists not shared")
	}
	if len(ms[2].Topics) != 1 || ms[2].Topics[0] != "b" {
		t.Errorf("third member topics %v", ms[2].Topics)
	}
	if ms[0].Owned[0].Topic != "b" || ms[1].Owned[0].Partitions[1] != 11 || ms[2].Owned[0].Partitions[0] != 2 {
		t.Errorf("owned %+v %+v %+v", ms[0].Owned, ms[1].Owned, ms[2].Owned)
	}
	ms[0].Owned[0].Partitions = append(ms[0].Owned[0].Partitions, 99)
	if ms[1].Owned[0].Partitions[0] != 1 {
		t.Error("appending to one member's partitions overwrote another's")
	}
}

func TestEncodeAssignmentsMatchesEncode(t *testing.T) {
	as := []assign.Assignment{
		{},
		{Partitions: []assign.TopicPartitions{{Topic: "a", Partitions: []int32{0, 2}}, {Topic: "bb", Partitions: []int32{1}}}},
		{UserData: []byte{}},
		{Partitions: []assign.TopicPartitions{{Topic: "c"}}, UserData: []byte{1, 2}},
	}
	for v := int16(0); v <= MaxVersion; v++ {
		got, err := EncodeAssignments(v, as)
		if err != nil {
			t.Fatal(err)
		}
		for i, a := range as {
			want, err := FromAssign(v, a).Encode()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got[i], want) || cap(got[i]) != len(got[i]) {
				t.Errorf("v%d assignment %d: %x (cap %d), want %x", v, i, got[i], cap(got[i]), want)
			}
		}
	}
	if _, err := EncodeAssignments(4, as); err == nil {
		t.Error("version 4 accepted")
	}
}

func TestAssignmentWriter(t *testing.T) {
	big := make([]int32, assignmentChunk/4) // one assignment larger than a chunk
	for i := range big {
		big[i] = int32(i)
	}
	var as []assign.Assignment
	for i := range 3000 { // ~1.5 chunks of small ones, then the large one, then more
		as = append(as, assign.Assignment{Partitions: []assign.TopicPartitions{
			{Topic: fmt.Sprintf("topic-%d", i%7), Partitions: []int32{int32(i), int32(i + 1)}},
			{Topic: "other", Partitions: make([]int32, i%90)},
		}, UserData: []byte{byte(i)}})
		if i == 2000 {
			as = append(as, assign.Assignment{Partitions: []assign.TopicPartitions{{Topic: "big", Partitions: big}}})
		}
	}
	for v := int16(0); v <= MaxVersion; v++ {
		w, err := NewAssignmentWriter(v)
		if err != nil {
			t.Fatal(err)
		}
		got := make([][]byte, len(as))
		for i, a := range as {
			if got[i], err = w.Encode(a); err != nil {
				t.Fatal(err)
			}
		}
		want, err := EncodeAssignments(v, as)
		if err != nil {
			t.Fatal(err)
		}
		for i := range as {
			if !bytes.Equal(got[i], want[i]) || cap(got[i]) != len(got[i]) {
				t.Fatalf("v%d assignment %d: %d bytes (cap %d), want %d", v, i, len(got[i]), cap(got[i]), len(want[i]))
			}
		}
	}
	w, err := NewAssignmentWriter(MaxVersion)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Encode(assign.Assignment{Partitions: []assign.TopicPartitions{{Topic: strings.Repeat("x", 1<<15)}}}); err == nil {
		t.Error("a topic name longer than the protocol carries was encoded")
	}
	if _, err := NewAssignmentWriter(MaxVersion + 1); err == nil {
		t.Error("an unknown version was accepted")
	}
}
