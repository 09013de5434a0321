package consumer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/IBM/sarama"
	"github.com/cohort-dev/cohort/consumer/assign"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func fullSubscription(v int16) Subscription {
	s := Subscription{
		Version:  v,
		Topics:   []string{"orders", "payments"},
		UserData: []byte{1, 2, 3},
	}
	if v >= 1 {
		s.Owned = []assign.TopicPartitions{{Topic: "orders", Partitions: []int32{0, 3}}, {Topic: "payments", Partitions: []int32{1}}}
	}
	s.Generation = -1
	if v >= 2 {
		s.Generation = 42
	}
	if v >= 3 {
		s.Rack = "eu-west-1a"
	}
	return s
}

func TestSubscriptionRoundTripEveryVersion(t *testing.T) {
	for v := int16(0); v <= MaxVersion; v++ {
		in := fullSubscription(v)
		b, err := in.Encode()
		if err != nil {
			t.Fatalf("v%d encode: %v", v, err)
		}
		out, err := DecodeSubscription(b)
		if err != nil {
			t.Fatalf("v%d decode: %v", v, err)
		}
		if !reflect.DeepEqual(in, out) {
			t.Errorf("v%d round trip:\n in  %+v\n out %+v", v, in, out)
		}
	}
}

func TestSubscriptionEncodeDropsFieldsAVersionLacks(t *testing.T) {
	s := fullSubscription(3)
	s.Version = 0
	b, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	out, err := DecodeSubscription(b)
	if err != nil {
		t.Fatal(err)
	}
	if out.Owned != nil || out.Generation != -1 || out.Rack != "" {
		t.Errorf("v0 carried fields it has no room for: %+v", out)
	}
}

func TestNullAndEmptyUserDataStayDistinct(t *testing.T) {
	for _, ud := range [][]byte{nil, {}} {
		b, err := Subscription{Version: 0, Topics: []string{"t"}, UserData: ud, Generation: -1}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		out, err := DecodeSubscription(b)
		if err != nil {
			t.Fatal(err)
		}
		if (out.UserData == nil) != (ud == nil) {
			t.Errorf("user data %#v decoded as %#v", ud, out.UserData)
		}
	}
}

func TestAssignmentRoundTripEveryVersion(t *testing.T) {
	for v := int16(0); v <= MaxVersion; v++ {
		in := Assignment{Version: v, Partitions: []assign.TopicPartitions{{Topic: "a", Partitions: []int32{2, 0}}, {Topic: "b"}}, UserData: []byte("x")}
		b, err := in.Encode()
		if err != nil {
			t.Fatal(err)
		}
		out, err := DecodeAssignment(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(in, out) {
			t.Errorf("v%d round trip:\n in  %+v\n out %+v", v, in, out)
		}
	}
}

// The bytes must equal what kmsg writes when driven directly (the
// reference franz-go clients use) for every version.
func TestSubscriptionBytesEqualKmsg(t *testing.T) {
	for v := int16(0); v <= MaxVersion; v++ {
		s := fullSubscription(v)
		got, err := s.Encode()
		if err != nil {
			t.Fatal(err)
		}
		m := kmsg.NewConsumerMemberMetadata()
		m.Version = v
		m.Topics = []string{"orders", "payments"}
		m.UserData = []byte{1, 2, 3}
		m.OwnedPartitions = []kmsg.ConsumerMemberMetadataOwnedPartition{{Topic: "orders", Partitions: []int32{0, 3}}, {Topic: "payments", Partitions: []int32{1}}}
		m.Generation = 42
		rack := "eu-west-1a"
		m.Rack = &rack
		if want := m.AppendTo(nil); !bytes.Equal(got, want) {
			t.Errorf("v%d:\n got  %x\n kmsg %x", v, got, want)
		}
	}
}

// sarama writes subscription versions 0 (Kafka < 2.4), 1 (>= 2.4) and
// 2 (>= 3.2) and never a rack; its struct can express v3 too, so compare all.
func TestSubscriptionBytesEqualSarama(t *testing.T) {
	for v := int16(0); v <= MaxVersion; v++ {
		s := fullSubscription(v)
		got, err := s.Encode()
		if err != nil {
			t.Fatal(err)
		}
		rack := "eu-west-1a"
		meta := &sarama.ConsumerGroupMemberMetadata{
			Version:         v,
			Topics:          []string{"orders", "payments"},
			UserData:        []byte{1, 2, 3},
			OwnedPartitions: []*sarama.OwnedPartition{{Topic: "orders", Partitions: []int32{0, 3}}, {Topic: "payments", Partitions: []int32{1}}},
			GenerationID:    42,
			RackID:          &rack,
		}
		req := &sarama.JoinGroupRequest{}
		if err := req.AddGroupProtocolMetadata("range", meta); err != nil {
			t.Fatal(err)
		}
		if want := req.OrderedGroupProtocols[0].Metadata; !bytes.Equal(got, want) {
			t.Errorf("v%d:\n got    %x\n sarama %x", v, got, want)
		}
		// And sarama reads our bytes back to the same fields.
		resp := &sarama.JoinGroupResponse{Members: []sarama.GroupMember{{MemberId: "m", Metadata: got}}}
		members, err := resp.GetMembers()
		if err != nil {
			t.Fatalf("v%d: sarama cannot decode our bytes: %v", v, err)
		}
		if sm := members["m"]; !reflect.DeepEqual(sm.Topics, s.Topics) || !bytes.Equal(sm.UserData, s.UserData) {
			t.Errorf("v%d: sarama decoded %+v", v, sm)
		}
	}
}

func TestAssignmentBytesEqualKmsgAndSarama(t *testing.T) {
	for v := int16(0); v <= MaxVersion; v++ {
		// One topic only: sarama keeps topics in a map, so with several
		// topics its byte order is random.
		a := Assignment{Version: v, Partitions: []assign.TopicPartitions{{Topic: "orders", Partitions: []int32{1, 4, 5}}}, UserData: []byte{9}}
		got, err := a.Encode()
		if err != nil {
			t.Fatal(err)
		}
		km := kmsg.ConsumerMemberAssignment{Version: v, Topics: []kmsg.ConsumerMemberAssignmentTopic{{Topic: "orders", Partitions: []int32{1, 4, 5}}}, UserData: []byte{9}}
		if want := km.AppendTo(nil); !bytes.Equal(got, want) {
			t.Errorf("v%d kmsg:\n got  %x\n want %x", v, got, want)
		}
		req := &sarama.SyncGroupRequest{}
		if err := req.AddGroupAssignmentMember("m", &sarama.ConsumerGroupMemberAssignment{Version: v, Topics: map[string][]int32{"orders": {1, 4, 5}}, UserData: []byte{9}}); err != nil {
			t.Fatal(err)
		}
		if want := req.GroupAssignments[0].Assignment; !bytes.Equal(got, want) {
			t.Errorf("v%d sarama:\n got  %x\n want %x", v, got, want)
		}
	}
	// sarama's default assignment: version 0, no topics, null user data.
	req := &sarama.SyncGroupRequest{}
	if err := req.AddGroupAssignmentMember("m", &sarama.ConsumerGroupMemberAssignment{}); err != nil {
		t.Fatal(err)
	}
	a, err := DecodeAssignment(req.GroupAssignments[0].Assignment)
	if err != nil || len(a.Partitions) != 0 || a.UserData != nil {
		t.Errorf("sarama empty assignment decoded as %+v, %v", a, err)
	}
}

// kafkaGoSubscription builds the bytes segmentio/kafka-go's ConsumerGroup
// sends (joingroup.go groupMetadata.writeTo with Version: 1): the version-1
// header over the version-0 body; nil user data is written as length -1.
func kafkaGoSubscription(topics []string, userData []byte) []byte {
	var b []byte
	b = binary.BigEndian.AppendUint16(b, 1)
	b = binary.BigEndian.AppendUint32(b, uint32(len(topics)))
	for _, t := range topics {
		b = binary.BigEndian.AppendUint16(b, uint16(len(t)))
		b = append(b, t...)
	}
	if userData == nil {
		b = binary.BigEndian.AppendUint32(b, 0xffffffff)
	} else {
		b = binary.BigEndian.AppendUint32(b, uint32(len(userData)))
		b = append(b, userData...)
	}
	return b
}

func TestKafkaGoVersionOneWithVersionZeroLayout(t *testing.T) {
	for _, ud := range [][]byte{nil, {7, 7}} {
		b := kafkaGoSubscription([]string{"a", "bb"}, ud)
		orig := bytes.Clone(b)
		s, err := DecodeSubscription(b)
		if err != nil {
			t.Fatalf("kafka-go subscription rejected: %v", err)
		}
		if !bytes.Equal(b, orig) {
			t.Fatal("decoder modified its input")
		}
		want := Subscription{Version: 0, Topics: []string{"a", "bb"}, UserData: ud, Generation: -1}
		if !reflect.DeepEqual(s, want) {
			t.Errorf("got %+v want %+v", s, want)
		}
	}
	// A real v1 subscription whose owned-partitions array is cut short is
	// still an error: the fallback applies only when v0 explains every byte.
	good, _ := fullSubscription(1).Encode()
	if _, err := DecodeSubscription(good[:len(good)-2]); !errors.Is(err, ErrMalformed) {
		t.Errorf("truncated v1: err = %v, want ErrMalformed", err)
	}
}

func TestNewerVersionsAndTrailingBytes(t *testing.T) {
	b, _ := fullSubscription(3).Encode()
	future := append(bytes.Clone(b), 0, 0, 0, 5, 0xAA) // some v4 field
	binary.BigEndian.PutUint16(future, 4)
	s, err := DecodeSubscription(future)
	if err != nil {
		t.Fatalf("v4 rejected: %v", err)
	}
	want := fullSubscription(3)
	if !reflect.DeepEqual(s, want) {
		t.Errorf("v4 read as %+v, want %+v", s, want)
	}
	for v := int16(0); v <= MaxVersion; v++ {
		b, _ := fullSubscription(v).Encode()
		s, err := DecodeSubscription(append(b, 1, 2, 3))
		if err != nil || !reflect.DeepEqual(s, fullSubscription(v)) {
			t.Errorf("v%d with trailing bytes: %+v, %v", v, s, err)
		}
	}
	ab, _ := Assignment{Version: 1, Partitions: []assign.TopicPartitions{{Topic: "t", Partitions: []int32{0}}}}.Encode()
	ab = append(ab, 0xde, 0xad)
	binary.BigEndian.PutUint16(ab, 7)
	a, err := DecodeAssignment(ab)
	if err != nil || a.Version != 3 || len(a.Partitions) != 1 {
		t.Errorf("future assignment: %+v, %v", a, err)
	}
}

func TestMalformedBytesGiveErrors(t *testing.T) {
	v3, _ := fullSubscription(3).Encode()
	negTopics := bytes.Clone(v3)
	binary.BigEndian.PutUint32(negTopics[2:], 0xffffffff) // topics array length -1
	negString := bytes.Clone(v3)
	binary.BigEndian.PutUint16(negString[6:], 0xfffe) // first topic length -2
	negVersion := bytes.Clone(v3)
	binary.BigEndian.PutUint16(negVersion, 0xffff)
	hugeArray := bytes.Clone(v3)
	binary.BigEndian.PutUint32(hugeArray[2:], 0x7fffffff)

	cases := map[string][]byte{
		"empty":              nil,
		"one byte":           {0},
		"negative version":   negVersion,
		"negative topics":    negTopics,
		"negative string":    negString,
		"huge array":         hugeArray,
		"truncated":          v3[:len(v3)-1],
		"truncated mid-user": v3[:30],
	}
	for name, b := range cases {
		_, err := DecodeSubscription(b)
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "consumer: subscription") {
			t.Errorf("%s: error %q does not say what was being decoded", name, err)
		}
	}

	ab, _ := Assignment{Version: 0, Partitions: []assign.TopicPartitions{{Topic: "t", Partitions: []int32{0, 1}}}}.Encode()
	negParts := bytes.Clone(ab)
	binary.BigEndian.PutUint32(negParts[9:], 0xffffffff) // partitions array length -1
	negVer := bytes.Clone(ab)
	binary.BigEndian.PutUint16(negVer, 0x8000)
	for name, b := range map[string][]byte{
		"one byte":            {0},
		"negative partitions": negParts,
		"negative version":    negVer,
		"truncated":           ab[:len(ab)-2],
	} {
		if _, err := DecodeAssignment(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("assignment %s: err = %v, want ErrMalformed", name, err)
		}
	}
}

func TestEmptyAssignmentBytesMeanNothingAssigned(t *testing.T) {
	a, err := DecodeAssignment(nil)
	if err != nil || len(a.Partitions) != 0 {
		t.Errorf("got %+v, %v", a, err)
	}
}

func TestEncodeRejectsBadInput(t *testing.T) {
	if _, err := (Subscription{Version: 4}).Encode(); err == nil {
		t.Error("subscription v4 encoded")
	}
	if _, err := (Subscription{Version: -1}).Encode(); err == nil {
		t.Error("subscription v-1 encoded")
	}
	if _, err := (Assignment{Version: 9}).Encode(); err == nil {
		t.Error("assignment v9 encoded")
	}
	long := strings.Repeat("x", 1<<15)
	if _, err := (Subscription{Topics: []string{long}}).Encode(); err == nil {
		t.Error("over-long topic encoded")
	}
	if _, err := (Subscription{Version: 3, Rack: long}).Encode(); err == nil {
		t.Error("over-long rack encoded")
	}
	if _, err := (Assignment{Partitions: []assign.TopicPartitions{{Topic: long}}}).Encode(); err == nil {
		t.Error("over-long assignment topic encoded")
	}
}

func TestMemberConversion(t *testing.T) {
	s := fullSubscription(3)
	m := s.Member("id-1", "inst")
	if m.ID != "id-1" || m.InstanceID != "inst" || m.Rack != s.Rack || m.Generation != 42 || !reflect.DeepEqual(m.Owned, s.Owned) {
		t.Errorf("member %+v from %+v", m, s)
	}
	a := FromAssign(2, assign.Assignment{Partitions: s.Owned, UserData: []byte{1}})
	if a.Version != 2 || !reflect.DeepEqual(a.Partitions, s.Owned) {
		t.Errorf("assignment %+v", a)
	}
}
