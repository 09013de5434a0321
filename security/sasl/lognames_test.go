package sasl

import (
	"strings"
	"testing"
)

// The reason of a failed authentication goes to cohort's log. For a user the
// node does not know it must not quote the name ("the name is whatever the
// client sent, perhaps a password typed in the wrong field, so only its
// length and the start of its SHA-256 are logged", docs/security.md; the
// comment of unknownUser). Several failure paths quoted the client's name
// before, or regardless of, finding out that no such user exists.
func TestUnknownUserNameNeverInFailureReason(t *testing.T) {
	const typed = "Tr0ub4dor&3" // a password typed into the user name field
	scramM := newSCRAM(t, ScramSHA256, scramStore(t))
	for _, tc := range []struct {
		name string
		run  func() error
	}{
		{"SCRAM, malformed client-final of an unknown user", func() error {
			s := scramM.Start()
			if _, _, err := s.Step([]byte("n,,n=" + typed + ",r=abc")); err != nil {
				t.Fatal(err)
			}
			_, _, err := s.Step([]byte("c=biws,r=abc,p=AAAA")) // a short proof
			return err
		}},
		{"SCRAM, authorization id of an unknown user", func() error {
			_, _, err := scramM.Start().Step([]byte("n,a=alice,n=" + typed + ",r=abc"))
			return err
		}},
		{"SCRAM, tokenauth of an unknown user", func() error {
			_, _, err := scramM.Start().Step([]byte("n,,n=" + typed + ",r=abc,tokenauth=true"))
			return err
		}},
		{"PLAIN, authorization id of an unknown user", func() error {
			_, _, _, err := plainStep(NewPlain(plainStore(t)), "alice\x00"+typed+"\x00pw")
			return err
		}},
	} {
		err := tc.run()
		if err == nil {
			t.Fatalf("%s: no failure", tc.name)
		}
		if strings.Contains(err.Error(), typed) {
			t.Errorf("%s: the logged reason quotes the unknown name: %q", tc.name, err)
		}
	}
}
