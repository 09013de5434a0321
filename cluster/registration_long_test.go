package cluster

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRegistrationLongerThanAKafkaString: a registration (a damaged or
// hand-written etcd value) whose host or rack is longer than a string of
// Kafka's protocol holds is not advertised with it: the int16 length of a
// non-flexible Metadata answer would wrap and corrupt the frame for every
// client that asks. A host that long hides the node, as any host no client
// can use does, and an endpoint's is left out; a rack that long is dropped
// with a note. The notes give the length, not the text.
func TestRegistrationLongerThanAKafkaString(t *testing.T) {
	long := strings.Repeat("h", 0x7fff+1)
	okRack := strings.Repeat("r", 0x7fff)

	v, _ := json.Marshal(nodeInfo{Host: long, Port: 9092})
	b, hidden, _ := readRegistration(1, v)
	if hidden == "" || !strings.Contains(hidden, "32768 bytes") || strings.Contains(hidden, "hhhh") {
		t.Errorf("host of 32768 bytes: advertised host of %d bytes, hidden %.200q; want it hidden, its length said", len(b.Host), hidden)
	}

	v, _ = json.Marshal(nodeInfo{Host: "h", Port: 9092, Listeners: []endpointInfo{
		{Name: "IN", Host: "h", Port: 9092}, {Name: "OUT", Host: long, Port: 9093}}})
	b, hidden, problems := readRegistration(2, v)
	if hidden != "" || len(b.Endpoints) != 1 || b.Endpoints[0].Listener != "IN" || len(problems) != 1 ||
		!strings.Contains(problems[0], "32768 bytes") || strings.Contains(problems[0], "hhhh") {
		t.Errorf("endpoint host of 32768 bytes: endpoints %d, hidden %.200q, problems %.200q; want OUT left out, its length said",
			len(b.Endpoints), hidden, problems)
	}

	v, _ = json.Marshal(nodeInfo{Host: "h", Port: 9092, Rack: &long})
	b, hidden, problems = readRegistration(3, v)
	if hidden != "" || b.Rack != nil || len(problems) != 1 || !strings.Contains(problems[0], "32768 bytes") ||
		strings.Contains(problems[0], "hhhh") {
		t.Errorf("rack of 32768 bytes: rack kept %v, hidden %.200q, problems %.200q; want the rack dropped, its length said",
			b.Rack != nil, hidden, problems)
	}

	v, _ = json.Marshal(nodeInfo{Host: "h", Port: 9092, Rack: &okRack})
	if b, hidden, problems = readRegistration(4, v); hidden != "" || len(problems) != 0 || b.Rack == nil || *b.Rack != okRack {
		t.Errorf("rack of 32767 bytes: hidden %.200q, problems %.200q; want it kept as it is", hidden, problems)
	}
}
