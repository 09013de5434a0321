package server

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/security/sasl"
)

// memCreds is a fixed credential store for the SASL fuzz target.
type memCreds map[string]sasl.Credential

func (m memCreds) Lookup(user, mech string) (sasl.Credential, bool) {
	c, ok := m[user+"/"+mech]
	return c, ok
}

// saslFuzzServer is a server whose one listener is SASL_PLAINTEXT with
// SCRAM-SHA-256 and PLAIN over one user, sessions of an hour (so that
// re-authentications are reachable), and an allow-all authorizer.
func saslFuzzServer(t testing.TB) *Server {
	srv := fuzzServer(t)
	cred, err := sasl.NewCredential(sasl.ScramSHA256, "pw", sasl.MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	creds := memCreds{"u/" + sasl.ScramSHA256: cred}
	scram, err := sasl.NewSCRAM(sasl.ScramSHA256, creds)
	if err != nil {
		t.Fatal(err)
	}
	sec := &Security{Mechanisms: map[string]sasl.Mechanism{sasl.ScramSHA256: scram, sasl.Plain: sasl.NewPlain(creds)},
		FailedAuthDelay: time.Microsecond, AuthTimeout: time.Second, Authorizer: allowAll{},
		SessionLifetime: time.Hour} // sessions that expire: re-authentications are reachable
	srv.cfg.Security = sec
	srv.sec = newSecurityRuntime(sec)
	srv.authz = sec.Authorizer
	srv.lcfg = []Listener{{Name: ProtocolSASLPlaintext, Protocol: ProtocolSASLPlaintext, Addr: "127.0.0.1:0"}}
	return srv
}

// saslSeeds are request streams that reach each state of the SASL
// exchange: handshakes v0 and v1, then SaslAuthenticate frames and raw
// tokens with SCRAM and PLAIN messages, and re-authentications.
func saslSeeds() [][]byte {
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	frame := func(r kmsg.Request) []byte { return f.AppendRequest(nil, r, 1) }
	hs := func(v int16, mech string) []byte {
		r := kmsg.NewPtrSASLHandshakeRequest()
		r.Version, r.Mechanism = v, mech
		return frame(r)
	}
	auth := func(tok string) []byte {
		r := kmsg.NewPtrSASLAuthenticateRequest()
		r.Version, r.SASLAuthBytes = 2, []byte(tok)
		return frame(r)
	}
	raw := func(tok string) []byte { return append(binary.BigEndian.AppendUint32(nil, uint32(len(tok))), tok...) }
	cat := func(parts ...[]byte) []byte {
		var out []byte
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	return [][]byte{
		cat(hs(1, sasl.ScramSHA256), auth("n,,n=u,r=abcdef"), auth("c=biws,r=abcdefXYZ,p=AAAA")),
		cat(hs(1, sasl.Plain), auth("\x00u\x00pw"), frame(kmsg.NewPtrListGroupsRequest())),
		cat(hs(0, sasl.Plain), raw("\x00u\x00pw"), frame(kmsg.NewPtrListGroupsRequest())),
		cat(hs(0, sasl.ScramSHA256), raw("n,,n=u,r=x"), raw("c=biws,r=x,p=")),
		cat(frame(kmsg.NewPtrApiVersionsRequest()), hs(1, "OAUTHBEARER")),
		cat(hs(1, sasl.ScramSHA256), hs(1, sasl.ScramSHA256)),
		// Re-authentications: with the same mechanism, then another.
		cat(hs(1, sasl.Plain), auth("\x00u\x00pw"), hs(1, sasl.Plain), auth("\x00u\x00pw"), frame(kmsg.NewPtrListGroupsRequest())),
		cat(hs(1, sasl.Plain), auth("\x00u\x00pw"), hs(1, sasl.ScramSHA256), auth("n,,n=u,r=abcdef")),
		auth("n,,n=u,r=abc"),
	}
}

// FuzzSASLConnStream feeds arbitrary bytes to a connection of a SASL
// listener (real SCRAM-SHA-256 and PLAIN mechanisms): it must end (answer
// or close) without a panic and without hanging, whatever state the bytes
// drive the exchange into.
func FuzzSASLConnStream(f *testing.F) {
	for _, s := range saslSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		streamConn(saslFuzzServer(t), stream)
	})
}
