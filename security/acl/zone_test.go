package acl

import "testing"

// TestAuthorizeIPv6Zones: a client's link-local address comes with the
// zone of the interface it arrived on (fe80::1%eth0). A DENY applies to the
// address whatever zone either side names, so a DENY written without the
// zone cannot be escaped; an ALLOW applies only to the address in the zone
// it names (a link-local address is unique on its link only, so a zoneless
// or other-zone ALLOW must not let in the host of that address on every
// link).
func TestAuthorizeIPv6Zones(t *testing.T) {
	topic, lit := ResourceTopic, PatternLiteral
	type req struct {
		host string
		op   Operation
		want bool
	}
	tests := []struct {
		name     string
		bindings []Binding
		reqs     []req
	}{
		{
			name: "DENY without a zone applies in every zone",
			bindings: []Binding{allow(alice, "*", OpAll, topic, lit, "orders"),
				deny(alice, "fe80::1", OpWrite, topic, lit, "orders")},
			reqs: []req{
				{"fe80::1%eth0", OpWrite, false},
				{"fe80::1%2", OpWrite, false},
				{"fe80::1", OpWrite, false},
				{"fe80::1%eth0", OpRead, true}, // only WRITE is denied
				{"fe80::2%eth0", OpWrite, true},
			},
		},
		{
			name: "DENY with a zone applies in every zone too",
			bindings: []Binding{allow(alice, "*", OpAll, topic, lit, "orders"),
				deny(alice, "fe80::1%eth0", OpAll, topic, lit, "orders")},
			reqs: []req{
				{"fe80::1%eth0", OpRead, false},
				{"fe80::1%eth1", OpRead, false},
				{"fe80::1", OpRead, false},
				{"fe80::2%eth0", OpRead, true},
			},
		},
		{
			name:     "ALLOW without a zone does not widen to zoned addresses",
			bindings: []Binding{allow(alice, "fe80::1", OpRead, topic, lit, "orders")},
			reqs: []req{
				{"fe80::1", OpRead, true},
				{"fe80::1%eth0", OpRead, false},
			},
		},
		{
			name:     "ALLOW with a zone applies in that zone only",
			bindings: []Binding{allow(alice, "fe80::1%eth0", OpRead, topic, lit, "orders")},
			reqs: []req{
				{"fe80::1%eth0", OpRead, true},
				{"fe80:0:0:0:0:0:0:1%eth0", OpRead, true}, // Java's spelling, same zone
				{"fe80::1%eth1", OpRead, false},
				{"fe80::1", OpRead, false},
			},
		},
	}
	for _, tc := range tests {
		s := NewSet(tc.bindings)
		a := &Authorizer{}
		for _, r := range tc.reqs {
			if got := a.Authorize(s, alice, r.host, r.op, topic, "orders"); got != r.want {
				t.Errorf("%s: %s from %s: allowed %v, want %v", tc.name, r.op, r.host, got, r.want)
			}
		}
	}
}
