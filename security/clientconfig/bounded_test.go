package clientconfig

import (
	"context"
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/internal/testpki"
)

// padLine fills the oversized files: text that no reader treats as PEM or
// as a property, and that an error must never quote.
const padLine = "# padding-not-for-errors\n"

// padded writes a copy of head followed by padLine lines, the whole
// larger than size bytes.
func padded(t *testing.T, name string, head []byte, size int) string {
	t.Helper()
	b := append([]byte(nil), head...)
	for len(b) <= size {
		b = append(b, padLine...)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestClientFilesBounded: the files a client reads (--tls-ca-file,
// --tls-cert-file, --tls-key-file, --oauth-token-file, --command-config)
// are read up to a bound, so a wrong path (a log, /dev/zero) fails with
// an error that names the file and the limit, rather than being read into
// memory whole and, for a token, sent to the node. The files here are
// valid but for their size: each was accepted before the bound.
func TestClientFilesBounded(t *testing.T) {
	ca := testpki.NewCA(t, "test-ca")
	pair := ca.Client(t, pkix.Name{CommonName: "c"})
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	check := func(what, file, limit string, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: a file over %s was accepted", what, limit)
			return
		}
		msg := err.Error()
		if !strings.Contains(msg, file) || !strings.Contains(msg, limit) || strings.Contains(msg, "padding") {
			t.Errorf("%s: error %q: want it to name the file and %s, never its content", what, msg, limit)
		}
	}

	bigCA := padded(t, "ca.pem", ca.CertPEM, 4<<20)
	_, err := Config{TLS: true, CAFile: bigCA}.TLSConfig()
	check("CA file", bigCA, "4 MiB", err)

	bigCert := padded(t, "cert.pem", read(pair.CertFile), 4<<20)
	_, err = Config{TLS: true, CertFile: bigCert, KeyFile: pair.KeyFile}.TLSConfig()
	check("certificate file", bigCert, "4 MiB", err)

	bigKey := padded(t, "key.pem", read(pair.KeyFile), 4<<20)
	_, err = Config{TLS: true, CertFile: pair.CertFile, KeyFile: bigKey}.TLSConfig()
	check("key file", bigKey, "4 MiB", err)

	bigToken := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(bigToken, []byte(strings.Repeat("padding", 1<<20/7+1)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mech, err := Config{Mechanism: MechanismOAuthBearer, TokenFile: bigToken}.SASLMechanism()
	if err != nil {
		t.Fatal(err)
	}
	_, msg, err := mech.Authenticate(context.Background(), "127.0.0.1:9092")
	if err == nil {
		t.Errorf("token file: a 1 MiB token was sent (a first message of %d bytes)", len(msg))
	} else {
		check("token file", bigToken, "512 KiB", err)
	}

	bigProps := padded(t, "client.properties", []byte("security.protocol=SSL\n"), 1<<20)
	_, err = LoadPropertiesFile(bigProps)
	check("properties file", bigProps, "1 MiB", err)
}
