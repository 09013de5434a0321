package clientconfig

import (
	"crypto/x509/pkix"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/internal/testpki"
)

// TestClientEncryptedKeyIsNamed: the CLI's --tls-key-file holding a
// passphrase-protected key is refused with an error that says so and how
// to decrypt it, as the node says of its own (tlsconfig.LoadKeyPair), not
// with Go's ASN.1 error that reads as a corrupt file.
func TestClientEncryptedKeyIsNamed(t *testing.T) {
	ca := testpki.NewCA(t, "test-ca")
	pair := ca.Client(t, pkix.Name{CommonName: "c"})
	key := filepath.Join(t.TempDir(), "client.key")
	block := &pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte("0123456789abcdef0123456789abcdef")}
	if err := os.WriteFile(key, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Config{TLS: true, CertFile: pair.CertFile, KeyFile: key}.TLSConfig()
	if err == nil || !strings.Contains(err.Error(), "encrypted with a passphrase") || !strings.Contains(err.Error(), key) {
		t.Fatalf("TLSConfig with an encrypted key: %v; want an error naming the file and saying the key is encrypted", err)
	}
}
