package sasl

import (
	"encoding/base64"
	"regexp"
	"strconv"
	"testing"
)

// legacyClient runs the exchange as librdkafka before 2.6.1 does: its
// client-final nonce is its own nonce followed by the server's combined
// nonce (noncePrefix lets a test send other shapes). It signs the message
// it sends with password.
func legacyClient(t *testing.T, m Mechanism, h scramHash, user, password, noncePrefix string) ([]byte, bool, error) {
	t.Helper()
	return legacyClientBinding(t, m, h, user, password, noncePrefix, "biws")
}

// legacyClientBinding is legacyClient with the client-final's channel
// binding (base64) given: "biws" is "n,,", the GS2 header it sends.
func legacyClientBinding(t *testing.T, m Mechanism, h scramHash, user, password, noncePrefix, binding string) ([]byte, bool, error) {
	t.Helper()
	const cnonce = "rdkafkanonce"
	c1b := "n=" + user + ",r=" + cnonce
	s := m.Start()
	s1, _, err := s.Step([]byte("n,," + c1b))
	if err != nil {
		return nil, false, err
	}
	f := regexp.MustCompile(`^r=([^,]+),s=([^,]+),i=(\d+)$`).FindStringSubmatch(string(s1))
	if f == nil {
		t.Fatalf("server-first message %q", s1)
	}
	iters, _ := strconv.Atoi(f[3])
	salted, err := saltPassword(h, password, b64(t, f[2]), iters)
	if err != nil {
		t.Fatal(err)
	}
	clientKey := hmacOf(h, salted, "Client Key")
	stored, _ := deriveKeys(h, salted)
	prefix := cnonce
	if noncePrefix != "" {
		prefix = noncePrefix
	}
	c2wop := "c=" + binding + ",r=" + prefix + f[1]
	sig := hmacOf(h, stored, c1b+","+string(s1)+","+c2wop)
	for i := range clientKey {
		clientKey[i] ^= sig[i]
	}
	return s.Step([]byte(c2wop + ",p=" + base64.StdEncoding.EncodeToString(clientKey)))
}

// TestSCRAMLegacyLibrdkafkaNonce: the doubled client nonce of librdkafka
// before 2.6.1 is accepted with a valid proof, and nothing else is: a wrong
// password, another prefix, or an unknown user still fail.
func TestSCRAMLegacyLibrdkafkaNonce(t *testing.T) {
	creds := scramStore(t)
	for _, mech := range scramMechs {
		h, _ := hashFor(mech.name)
		m := newSCRAM(t, mech.name, creds)
		t.Run(mech.name, func(t *testing.T) {
			out, done, err := legacyClient(t, m, h, "alice", "alice-secret", "")
			if err != nil || !done || len(out) < 3 || string(out[:2]) != "v=" {
				t.Fatalf("legacy nonce with the right password: %q %v %v", out, done, err)
			}
			_, _, err = legacyClient(t, m, h, "alice", "wrong", "")
			wantFailure(t, err, "invalid proof", "wrong")
			_, _, err = legacyClient(t, m, h, "alice", "alice-secret", "othernonce")
			wantFailure(t, err, "nonce mismatch")
			_, _, err = legacyClient(t, m, h, "mallory", "x", "")
			wantFailure(t, err, "unknown user")
			// The channel binding must repeat the GS2 header ("n,,"), as
			// on the usual path: not "y,,", "p=tls-unique,," or junk,
			// even with a proof over them.
			for _, cb := range []string{"eSws", "cD10bHMtdW5pcXVlLCw=", "AAAA"} {
				_, _, err = legacyClientBinding(t, m, h, "alice", "alice-secret", "", cb)
				wantFailure(t, err, "channel binding")
			}
		})
	}
}
