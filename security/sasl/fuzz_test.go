package sasl

import (
	"bytes"
	"errors"
	"testing"

	"github.com/go-jose/go-jose/v4"
)

// checkStep runs one Step and checks the contract: a failure wraps
// ErrAuthFailed and is not done; success has a principal.
func checkStep(t *testing.T, s Session, in []byte) (done bool, err error) {
	t.Helper()
	_, done, err = s.Step(in)
	switch {
	case err != nil && !errors.Is(err, ErrAuthFailed):
		t.Fatalf("error %v does not wrap ErrAuthFailed", err)
	case err != nil && done:
		t.Fatalf("done with an error")
	case done && s.Principal() == "":
		t.Fatalf("done without a principal")
	}
	return done, err
}

func FuzzSCRAMStep(f *testing.F) {
	store := scramStore(f)
	mechs := []Mechanism{newSCRAM(f, ScramSHA256, store), newSCRAM(f, ScramSHA512, store)}
	f.Add([]byte("n,,n=alice,r=abc"), []byte("c=biws,r=abc,p=AAAA"), false)
	f.Add([]byte("n,a=alice,n=alice,r=abc,ext=1"), []byte("c=biws,r=abcdef,x=y,p="+string(bytes.Repeat([]byte("A"), 86))+"=="), true)
	f.Add([]byte("n,,n=mallory,r=abc"), []byte("c=biws,r=abc,p="+string(bytes.Repeat([]byte("A"), 43))+"="), false)
	f.Add([]byte(",,n=alice,r=abc"), []byte(""), true)
	f.Fuzz(func(t *testing.T, first, final []byte, sha512 bool) {
		m := mechs[0]
		if sha512 {
			m = mechs[1]
		}
		s := m.Start()
		if done, err := checkStep(t, s, first); done || err != nil {
			return
		}
		checkStep(t, s, final)
		checkStep(t, s, final)
	})
}

func FuzzPlainStep(f *testing.F) {
	m := NewPlain(plainStore(f))
	f.Add([]byte("\x00alice\x00alice-512"))
	f.Add([]byte("alice\x00alice\x00x"))
	f.Add([]byte("\x00\x00"))
	f.Add([]byte("a\x00b\x00c\x00d"))
	f.Fuzz(func(t *testing.T, in []byte) {
		s := m.Start()
		checkStep(t, s, in)
		checkStep(t, s, in)
	})
}

func FuzzOAuthStep(f *testing.F) {
	testKeys(f)
	fx := newOAuthFixture(f, OAuthConfig{Issuer: "https://idp"}, bothKeys()...)
	tok := sign(f, jose.RS256, rsaKey, "rsa1", claims("iss", "https://idp"))
	f.Add(initial(tok))
	f.Add([]byte("n,a=alice,\x01auth=Bearer " + tok + "\x01k=v\x01\x01"))
	f.Add(initial(sign(f, jose.ES256, ecKey, "", claims())))
	f.Add(initial("eyJhbGciOiJub25lIn0.e30."))
	f.Add([]byte("n,,\x01\x01"))
	f.Fuzz(func(t *testing.T, in []byte) {
		s := fx.m.Start()
		checkStep(t, s, in)
		checkStep(t, s, []byte{1})
	})
}

// FuzzCredentialUnmarshal checks that any input either fails or decodes
// to a credential that encodes back to the same bytes.
func FuzzCredentialUnmarshal(f *testing.F) {
	for _, mech := range []string{ScramSHA256, ScramSHA512} {
		c, _ := NewCredential(mech, "pw", MinIterations)
		b, _ := c.MarshalBinary()
		f.Add(b)
	}
	f.Add([]byte{1, 1, 0x80, 0x20, 1})
	f.Fuzz(func(t *testing.T, in []byte) {
		var c Credential
		if c.UnmarshalBinary(in) != nil {
			return
		}
		out, err := c.MarshalBinary()
		if err != nil || !bytes.Equal(out, in) {
			t.Fatalf("decoded %x re-encodes as %x (%v)", in, out, err)
		}
	})
}
