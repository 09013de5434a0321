package node

import (
	"errors"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/server"
)

// TestListenersSharingAPortRefused: two of the node's own listeners (the
// Kafka listeners and the HTTP one) on the same port of the same address,
// or one of them on the wildcard address, cannot both bind: the start
// failed at the second bind with "address already in use" (exit 1), which
// sends an operator looking for another process. Kafka refuses listeners
// that share a port in its configuration check; cohort now refuses these
// before binding anything, naming both. Listeners on distinct addresses
// (which bind) and port 0 (any free port) still start.
func TestListenersSharingAPortRefused(t *testing.T) {
	l := func(proto, addr string) server.Listener { return server.Listener{Protocol: proto, Addr: addr} }
	plain, sasl := server.ProtocolPlaintext, server.ProtocolSASLPlaintext
	for _, c := range []struct {
		listeners []server.Listener
		http      string
		want      string // in the error; "" starts
	}{
		{[]server.Listener{l(plain, "127.0.0.1:19092"), l(sasl, "127.0.0.1:19092")}, "",
			"PLAINTEXT://127.0.0.1:19092 and SASL_PLAINTEXT://127.0.0.1:19092 both bind port 19092"},
		{[]server.Listener{l(plain, "127.0.0.1:19092"), l(sasl, "0.0.0.0:19092")}, "",
			"PLAINTEXT://127.0.0.1:19092 and SASL_PLAINTEXT://0.0.0.0:19092 both bind port 19092"},
		{[]server.Listener{l(plain, "127.0.0.1:19092")}, "127.0.0.1:19092",
			"PLAINTEXT://127.0.0.1:19092 and --http-listen 127.0.0.1:19092 both bind port 19092"},
		{[]server.Listener{l(sasl, "[::]:19092")}, "[::1]:19092", "both bind port 19092"},
		{[]server.Listener{l(plain, "127.0.0.1:19092"), l(sasl, "127.0.0.2:19092")}, "", ""},
		{[]server.Listener{l(plain, "127.0.0.1:0"), l(sasl, "127.0.0.1:0")}, "127.0.0.1:0", ""},
		{[]server.Listener{l(plain, "127.0.0.1:19092")}, "127.0.0.1:19093", ""},
	} {
		err := CheckConfig(Config{Listeners: c.listeners, HTTPListen: c.http})
		if c.want == "" {
			if err != nil {
				t.Errorf("%v, http %q: %v", c.listeners, c.http, err)
			}
			continue
		}
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v, http %q: %v, want a ConfigError containing %q", c.listeners, c.http, err, c.want)
		}
	}
}
