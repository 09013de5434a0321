package clientconfig

import (
	"strings"
	"testing"
)

// fuzzSecret is the password of FuzzPropertiesSecret's files.
const fuzzSecret = "Hunter2Secret9"

// FuzzPropertiesSecret: a client properties file holding a password, around
// which the fuzzer writes anything (other settings, continuation lines,
// quotes, comments that swallow parts of it), never makes LoadProperties or
// Validate return an error that holds the password, in any case.
func FuzzPropertiesSecret(f *testing.F) {
	const sasl = "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n"
	const mod = "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"alice\" "
	f.Add(sasl+"sasl.jaas.config="+mod, ";\n")
	f.Add(sasl+"sasl.jaas.config="+mod, "\n")
	f.Add(sasl+"sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required ", ";")
	f.Add("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=bob\nsasl.", "")
	f.Add("security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location=/t.pem\nssl.key.", "")
	f.Add(sasl+"sasl.jaas.config=x.Y required ", " z;")
	// A stray backslash runs the next line into a setting's value.
	f.Add("security.protocol=SASL_SSL\\\nsasl.jaas.config="+mod, ";")
	f.Add("security.protocol=SASL_SSL\nsasl.username=a\nsasl.mechanism=PLAIN\\\nsasl.", "")
	f.Fuzz(func(t *testing.T, before, after string) {
		in := before + `password="` + fuzzSecret + `"` + after
		c, err := LoadProperties(strings.NewReader(in))
		if err == nil {
			err = c.Validate()
		}
		if err != nil && strings.Contains(strings.ToLower(err.Error()), strings.ToLower(fuzzSecret)) {
			t.Fatalf("the error for %q holds the password: %v", in, err)
		}
	})
}
