package cluster

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/cohort-dev/cohort/server"
)

// maxRegistrationNote bounds what readRegistration says about one value
// (hidden and every problem together): it goes into a log line, the
// console's cluster page and every watch's re-read, and an etcd value can
// be a megabyte and a half.
const maxRegistrationNote = 2048

// FuzzReadRegistration feeds arbitrary registration values, as another
// build, a hand edit or a damaged etcd would leave them, to the decoder
// that turns them into the broker given to clients. Nothing may panic;
// what it says about the value is bounded in size whatever the value
// holds; a broker it advertises (hidden empty) has only usable addresses;
// and a registration cohort writes reads back as the broker it came from.
func FuzzReadRegistration(f *testing.F) {
	rack := "r1"
	for _, b := range []server.Broker{
		{NodeID: 3, Host: "127.0.0.1", Port: 9092},
		{NodeID: 1, Host: "h", Port: 1, Rack: &rack, Endpoints: []server.Endpoint{{Listener: "IN", Host: "h", Port: 2}, {Listener: "OUT", Host: "e.example", Port: 65535}}},
	} {
		v, _ := json.Marshal(registrationOf(b))
		f.Add(b.NodeID, v)
	}
	f.Add(int32(0), []byte(`{"host":"0.0.0.0","port":0,"listeners":[{"name":"x","host":"","port":70000}]}`))
	f.Add(int32(-1), []byte(`{"host":"h","port":1e99}`))
	f.Add(int32(2), []byte(`not json`))
	f.Fuzz(func(t *testing.T, id int32, info []byte) {
		b, hidden, problems := readRegistration(id, info)
		if b.NodeID != id {
			t.Fatalf("value of node %d read as node %d", id, b.NodeID)
		}
		size := len(hidden)
		for _, p := range problems {
			size += len(p)
		}
		if size > maxRegistrationNote {
			t.Fatalf("a %d-byte value gives %d bytes of notes (at most %d): hidden %.200q, %d problems",
				len(info), size, maxRegistrationNote, hidden, len(problems))
		}
		if hidden != "" {
			return
		}
		if why := unusableAddr(b.Host, b.Port); why != "" {
			t.Fatalf("advertised with an address that %s", why)
		}
		for _, e := range b.Endpoints {
			if why := unusableAddr(e.Host, e.Port); why != "" {
				t.Fatalf("endpoint %q advertised, but it %s", e.Listener, why)
			}
		}
		if len(problems) > 0 {
			return
		}
		// What a node advertising b registers reads back as b.
		v, err := json.Marshal(registrationOf(b))
		if err != nil {
			t.Fatal(err)
		}
		again, hidden2, problems2 := readRegistration(id, v)
		if hidden2 != "" || len(problems2) > 0 || !reflect.DeepEqual(again, b) {
			t.Fatalf("%+v registered as %s reads back as %+v (hidden %q, problems %q)", b, v, again, hidden2, problems2)
		}
	})
}
