package node

import (
	"errors"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/server"
)

// TestAdvertisedHostMustBeConnectable: an advertised address whose host is
// the wildcard (0.0.0.0, ::) or empty is no address a client on another
// machine can connect to: a client given it dials its own machine. Kafka
// refuses advertised.listeners on 0.0.0.0 at start; cohort served it. Both
// --advertise and --advertised-listeners are now refused before anything
// is opened, naming the flag; a host name or a routable address starts.
func TestAdvertisedHostMustBeConnectable(t *testing.T) {
	plain := []server.Listener{{Protocol: server.ProtocolPlaintext, Addr: "127.0.0.1:0"}}
	for _, c := range []struct {
		advertise  string
		advertised []server.Endpoint
		want       string // in the error; "" starts
	}{
		{advertise: "0.0.0.0:9092", want: "--advertise 0.0.0.0:9092"},
		{advertise: "[::]:9092", want: "--advertise [::]:9092"},
		{advertise: ":9092", want: "--advertise :9092"},
		{advertised: []server.Endpoint{{Listener: "PLAINTEXT", Host: "0.0.0.0", Port: 9092}}, want: "--advertised-listeners PLAINTEXT://0.0.0.0:9092"},
		{advertised: []server.Endpoint{{Listener: "PLAINTEXT", Host: "::", Port: 9092}}, want: "--advertised-listeners PLAINTEXT://[::]:9092"},
		{advertised: []server.Endpoint{{Listener: "PLAINTEXT", Host: "", Port: 0}}, want: "--advertised-listeners PLAINTEXT://:0"},
		// Blank hosts: cluster mode's registry treats a host of spaces
		// as empty and hides the node from clients, so the node
		// refuses it too rather than starting unreachable.
		{advertise: " :9092", want: "--advertise  :9092"},
		{advertised: []server.Endpoint{{Listener: "PLAINTEXT", Host: "\t", Port: 9092}}, want: "--advertised-listeners PLAINTEXT://\t:9092"},
		{advertise: "kafka.example.com:9092"},
		{advertise: "10.1.2.3:0"},
		{advertised: []server.Endpoint{{Listener: "PLAINTEXT", Host: "::1", Port: 9092}}},
	} {
		cfg := Config{Listeners: plain, Advertise: c.advertise, Advertised: c.advertised}
		err := CheckConfig(cfg)
		if c.want == "" {
			if err != nil {
				t.Errorf("advertise %q %v: %v", c.advertise, c.advertised, err)
			}
			continue
		}
		var ce *ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("advertise %q %v: %v, want a ConfigError", c.advertise, c.advertised, err)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "host name or IP address") {
			t.Errorf("advertise %q %v: error %q does not name %q and what to give", c.advertise, c.advertised, err, c.want)
		}
	}
}

// TestAdvertiseAndAdvertisedListenersOnce: --advertise is the address of
// the first listener; an --advertised-listeners entry for that same
// listener silently won over it. Giving both for one listener is now
// refused, naming both; --advertise for the first listener with
// --advertised-listeners for the others still starts.
func TestAdvertiseAndAdvertisedListenersOnce(t *testing.T) {
	ls := []server.Listener{{Protocol: server.ProtocolPlaintext, Addr: "127.0.0.1:0"}, {Protocol: server.ProtocolSASLPlaintext, Addr: "127.0.0.1:0"}}
	err := CheckConfig(Config{Listeners: ls, Advertise: "a.example.com:9092",
		Advertised: []server.Endpoint{{Listener: "PLAINTEXT", Host: "b.example.com", Port: 9092}}})
	var ce *ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "--advertise a.example.com:9092 and --advertised-listeners PLAINTEXT://b.example.com:9092") {
		t.Errorf("both for PLAINTEXT: %v, want a ConfigError naming both", err)
	}
	if err := CheckConfig(Config{Listeners: ls, Advertise: "a.example.com:9092",
		Advertised: []server.Endpoint{{Listener: "SASL_PLAINTEXT", Host: "b.example.com", Port: 9093}}}); err != nil {
		t.Errorf("--advertise for PLAINTEXT, --advertised-listeners for SASL_PLAINTEXT: %v", err)
	}
}
