package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/testpki"
)

// serve accepts TLS connections with cfg until the test ends and
// completes each handshake.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				c.(*tls.Conn).Handshake()
				var b [1]byte
				c.Read(b[:])
			}()
		}
	}()
	return ln.Addr().String()
}

func dial(t *testing.T, addr string, cfg *tls.Config) (*tls.Conn, error) {
	t.Helper()
	return tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
}

func TestReloadServesNewCertificateKeepsOpenConnections(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	first := ca.Server(t, "first")
	second := ca.Server(t, "second")
	s, err := New(Options{CertFile: first.CertFile, KeyFile: first.KeyFile})
	if err != nil {
		t.Fatal(err)
	}
	if s.Config().MinVersion != tls.VersionTLS12 {
		t.Fatalf("MinVersion %x, want TLS 1.2", s.Config().MinVersion)
	}
	addr := serve(t, s.Config())
	open, err := dial(t, addr, ca.ClientConfig(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if cn := open.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "first" {
		t.Fatalf("served %q", cn)
	}
	// Replace the files and reload: new handshakes get the new one.
	for src, dst := range map[string]string{second.CertFile: first.CertFile, second.KeyFile: first.KeyFile} {
		b, _ := os.ReadFile(src)
		if err := os.WriteFile(dst, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	c, err := dial(t, addr, ca.ClientConfig(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if cn := c.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "second" {
		t.Fatalf("after reload served %q, want second", cn)
	}
	// The connection made before the reload is still usable.
	open.SetDeadline(time.Now().Add(time.Second))
	if _, err := open.Write([]byte("x")); err != nil {
		t.Fatalf("connection from before the reload: %v", err)
	}
}

func TestReloadOfBrokenFilesKeepsOldCertificate(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	p := ca.Server(t, "good")
	s, err := New(Options{CertFile: p.CertFile, KeyFile: p.KeyFile})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(p.KeyFile, []byte("not a key"), 0o600)
	if err := s.Reload(); err == nil {
		t.Fatal("reload of a broken key succeeded")
	} else if strings.Contains(err.Error(), "not a key") {
		t.Fatalf("error %q shows the key file's content", err)
	}
	if s.Certificate().Leaf.Subject.CommonName != "good" {
		t.Fatal("the old certificate was dropped")
	}
}

func TestClientAuthRequired(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	p := ca.Server(t, "server")
	s, err := New(Options{CertFile: p.CertFile, KeyFile: p.KeyFile, ClientCAFile: ca.CertFile, ClientAuth: ClientAuthRequired})
	if err != nil {
		t.Fatal(err)
	}
	if !s.RequiresClientCert() {
		t.Fatal("RequiresClientCert false")
	}
	addr := serve(t, s.Config())
	client := ca.Client(t, pkix.Name{CommonName: "alice"})
	c, err := dial(t, addr, ca.ClientConfig(&client))
	if err != nil {
		t.Fatalf("with a certificate: %v", err)
	}
	c.Close()
	// Without one the server rejects the handshake (TLS 1.3 reports it on
	// the first read).
	c, err = dial(t, addr, ca.ClientConfig(nil))
	if err == nil {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		var b [1]byte
		_, err = c.Read(b[:])
		c.Close()
	}
	if err == nil {
		t.Fatal("a client without a certificate was accepted")
	}
	// A certificate from another CA is refused too.
	other := testpki.NewCA(t, "other")
	stranger := other.Client(t, pkix.Name{CommonName: "mallory"})
	cfg := ca.ClientConfig(nil)
	cfg.Certificates = []tls.Certificate{stranger.TLS}
	c, err = dial(t, addr, cfg)
	if err == nil {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		var b [1]byte
		_, err = c.Read(b[:])
		c.Close()
	}
	if err == nil {
		t.Fatal("a certificate of another CA was accepted")
	}
}

func TestOptionErrors(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	p := ca.Server(t, "server")
	for name, o := range map[string]Options{
		"no key":              {CertFile: p.CertFile},
		"bad client auth":     {CertFile: p.CertFile, KeyFile: p.KeyFile, ClientAuth: "maybe"},
		"required without CA": {CertFile: p.CertFile, KeyFile: p.KeyFile, ClientAuth: ClientAuthRequired},
		"CA without auth":     {CertFile: p.CertFile, KeyFile: p.KeyFile, ClientCAFile: ca.CertFile},
		"CA file not PEM":     {CertFile: p.CertFile, KeyFile: p.KeyFile, ClientCAFile: p.KeyFile, ClientAuth: ClientAuthRequested},
		"missing certificate": {CertFile: p.CertFile + ".missing", KeyFile: p.KeyFile},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}

// TestReloadClientCAs: Reload reads the client CA file again, so that a CA
// removed from it stops verifying client certificates for new connections,
// and one added starts to, without a restart; a broken file changes
// nothing. (Only the certificate was reloaded: a CA removed for a
// compromise stayed trusted until a restart.)
func TestReloadClientCAs(t *testing.T) {
	ca1, ca2, ca3 := testpki.NewCA(t, "ca1"), testpki.NewCA(t, "ca2"), testpki.NewCA(t, "ca3")
	p := ca1.Server(t, "server")
	pemOf := func(cas ...*testpki.CA) []byte {
		var b []byte
		for _, ca := range cas {
			c, err := os.ReadFile(ca.CertFile)
			if err != nil {
				t.Fatal(err)
			}
			b = append(b, c...)
		}
		return b
	}
	caFile := t.TempDir() + "/clients.pem"
	if err := os.WriteFile(caFile, pemOf(ca1, ca2), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, auth := range []string{ClientAuthRequired, ClientAuthRequested} {
		os.WriteFile(caFile, pemOf(ca1, ca2), 0o600)
		s, err := New(Options{CertFile: p.CertFile, KeyFile: p.KeyFile, ClientCAFile: caFile, ClientAuth: auth})
		if err != nil {
			t.Fatal(err)
		}
		addr := serve(t, s.Config())
		accepted := func(ca *testpki.CA) bool {
			t.Helper()
			client := ca.Client(t, pkix.Name{CommonName: "alice"})
			cfg := ca1.ClientConfig(nil) // trusts the server's CA
			// Sent whatever CAs the server names (Go's client would
			// otherwise send none that the server does not list, and
			// "requested" lets a client without one in).
			cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &client.TLS, nil }
			c, err := dial(t, addr, cfg)
			if err == nil {
				// TLS 1.3 reports a refused client certificate on the
				// first read; the server reads one byte and closes.
				c.SetDeadline(time.Now().Add(5 * time.Second))
				c.Write([]byte{0})
				var b [1]byte
				_, err = c.Read(b[:])
				c.Close()
				if err != nil && strings.Contains(err.Error(), "EOF") {
					err = nil // the server's close after a good handshake
				}
			}
			return err == nil
		}
		if !accepted(ca1) || !accepted(ca2) || accepted(ca3) {
			t.Fatalf("%s: before any reload: want ca1 and ca2 accepted, ca3 refused", auth)
		}
		os.WriteFile(caFile, pemOf(ca1, ca3), 0o600)
		if accepted(ca3) || !accepted(ca2) {
			t.Fatalf("%s: the file changed without a reload took effect", auth)
		}
		if err := s.Reload(); err != nil {
			t.Fatal(err)
		}
		if !accepted(ca1) || accepted(ca2) || !accepted(ca3) {
			t.Fatalf("%s: after the reload: want ca1 and ca3 accepted, the removed ca2 refused", auth)
		}
		os.WriteFile(caFile, []byte("not a certificate"), 0o600)
		if err := s.Reload(); err == nil || strings.Contains(err.Error(), "not a certificate") {
			t.Fatalf("%s: reload of a broken CA file: %v", auth, err)
		}
		if !accepted(ca3) || accepted(ca2) {
			t.Fatalf("%s: a broken CA file changed the trusted CAs", auth)
		}
		if s.WithoutClientAuth().ClientAuth != tls.NoClientCert || s.WithoutClientAuth().GetConfigForClient != nil {
			t.Fatalf("%s: WithoutClientAuth still asks for client certificates", auth)
		}
	}
}

// TestReloadRefusesHugeFile: a certificate, key or CA file is read up to
// MaxPEMFile bytes and no further, so that a path given by mistake (a log,
// a disk image, /dev/zero) fails the reload instead of filling the memory;
// the pair in use stays. (The file here is a good certificate followed by
// 64 MiB of zeros, which a whole read accepted.)
func TestReloadRefusesHugeFile(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	first, second := ca.Server(t, "first"), ca.Server(t, "second")
	dir := t.TempDir()
	certFile, keyFile, caFile := dir+"/tls.crt", dir+"/tls.key", dir+"/ca.pem"
	copyFile(t, first.CertFile, certFile)
	copyFile(t, first.KeyFile, keyFile)
	copyFile(t, ca.CertFile, caFile)
	s, err := New(Options{CertFile: certFile, KeyFile: keyFile, ClientCAFile: caFile, ClientAuth: ClientAuthRequested})
	if err != nil {
		t.Fatal(err)
	}
	copyFile(t, second.KeyFile, keyFile)
	for _, huge := range []string{certFile, caFile} {
		copyFile(t, second.CertFile, certFile)
		copyFile(t, ca.CertFile, caFile)
		if err := os.Truncate(huge, 64<<20); err != nil { // sparse: no disk used
			t.Fatal(err)
		}
		err := s.Reload()
		if err == nil || !strings.Contains(err.Error(), "too large") {
			t.Fatalf("reload with a 64 MiB %s: %v, want an error saying it is too large", huge, err)
		}
		if cn := s.Certificate().Leaf.Subject.CommonName; cn != "first" {
			t.Fatalf("after a refused reload the certificate is %q, want first", cn)
		}
	}
	copyFile(t, second.CertFile, certFile)
	copyFile(t, ca.CertFile, caFile)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if cn := s.Certificate().Leaf.Subject.CommonName; cn != "second" {
		t.Fatalf("the next good reload serves %q, want second", cn)
	}
}

// copyFile writes src's content to dst.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestReloadRefusesHalfWrittenFile: a file rewritten in place (an editor,
// `cat new > file`) can be read half written. Go's PEM readers skip a block
// cut short, so such a read loaded a certificate file as its leaf without
// the intermediate after it, and a CA file without its last CAs, whose
// clients were then refused. The reload now fails and keeps what is in use;
// the next reload of the whole file takes it.
func TestReloadRefusesHalfWrittenFile(t *testing.T) {
	root := testpki.NewCA(t, "root")
	caA, caB := testpki.NewCA(t, "clients-a"), testpki.NewCA(t, "clients-b")
	first, second := root.Server(t, "first"), root.Server(t, "second")
	dir := t.TempDir()
	certFile, keyFile, caFile := dir+"/tls.crt", dir+"/tls.key", dir+"/ca.pem"
	read := func(name string) []byte {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	write := func(name string, b []byte) {
		if err := os.WriteFile(name, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Leaf and the CA after it: a chain of two.
	chain1 := append(read(first.CertFile), root.CertPEM...)
	chain2 := append(read(second.CertFile), root.CertPEM...)
	bundle := append(read(caA.CertFile), read(caB.CertFile)...)
	write(certFile, chain1)
	write(keyFile, read(first.KeyFile))
	write(caFile, bundle)
	s, err := New(Options{CertFile: certFile, KeyFile: keyFile, ClientCAFile: caFile, ClientAuth: ClientAuthRequired})
	if err != nil {
		t.Fatal(err)
	}
	trusts := func(ca *testpki.CA) bool {
		c := ca.Client(t, pkix.Name{CommonName: "alice"})
		leaf, err := x509.ParseCertificate(c.TLS.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		_, err = leaf.Verify(x509.VerifyOptions{Roots: s.verifying.Load().ClientCAs, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		return err == nil
	}
	if !trusts(caA) || !trusts(caB) {
		t.Fatal("before any reload: want both client CAs trusted")
	}
	write(keyFile, read(second.KeyFile))
	// The certificate file read with its second block half written.
	write(certFile, chain2[:len(chain2)-len(root.CertPEM)/2])
	err = s.Reload()
	if err == nil || !strings.Contains(err.Error(), "cut short") {
		t.Fatalf("reload of a chain whose second certificate is cut short: %v (served %d certificates), want an error", err, len(s.Certificate().Certificate))
	}
	if strings.Contains(err.Error(), "MII") {
		t.Fatalf("error %q shows the file's content", err)
	}
	if cn, n := s.Certificate().Leaf.Subject.CommonName, len(s.Certificate().Certificate); cn != "first" || n != 2 {
		t.Fatalf("after a refused reload: serving %q with %d certificates, want first with 2", cn, n)
	}
	// The CA file read with its second CA half written.
	write(certFile, chain2)
	write(caFile, bundle[:len(bundle)-100])
	if err := s.Reload(); err == nil || !strings.Contains(err.Error(), "cut short") {
		t.Fatalf("reload of a CA file whose second CA is cut short: %v (client CA b trusted: %v), want an error", err, trusts(caB))
	}
	if !trusts(caB) || s.Certificate().Leaf.Subject.CommonName != "first" {
		t.Fatal("a refused reload changed the client CAs or the certificate in use")
	}
	// The writes finish: the next reload takes the files.
	write(caFile, bundle)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if cn, n := s.Certificate().Leaf.Subject.CommonName, len(s.Certificate().Certificate); cn != "second" || n != 2 || !trusts(caA) || !trusts(caB) {
		t.Fatalf("after the writes: serving %q with %d certificates, want second with 2 and both client CAs", cn, n)
	}
}

// TestEncryptedKeyIsNamed: a passphrase-protected key (PKCS #8's ENCRYPTED
// PRIVATE KEY, or OpenSSL's older Proc-Type: 4,ENCRYPTED) is refused with
// an error that says so and how to decrypt it, where Go's own error was an
// ASN.1 structure error that read as a corrupt file; a reload to such a key
// keeps the pair in use.
func TestEncryptedKeyIsNamed(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	first := ca.Server(t, "first")
	dir := t.TempDir()
	certFile, keyFile := dir+"/tls.crt", dir+"/tls.key"
	copyFile(t, first.CertFile, certFile)
	copyFile(t, first.KeyFile, keyFile)
	s, err := New(Options{CertFile: certFile, KeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte("0123456789abcdef0123456789abcdef") // ciphertext, as far as Go can tell
	for name, block := range map[string]*pem.Block{
		"PKCS #8":    {Type: "ENCRYPTED PRIVATE KEY", Bytes: body},
		"Proc-Type:": {Type: "RSA PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-256-CBC,00112233445566778899AABBCCDDEEFF"}, Bytes: body},
	} {
		if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		err := s.Reload()
		if err == nil || !strings.Contains(err.Error(), "encrypted with a passphrase") || !strings.Contains(err.Error(), keyFile) {
			t.Fatalf("%s: reload with an encrypted key: %v, want an error naming the file and saying the key is encrypted", name, err)
		}
		if s.Certificate().Leaf.Subject.CommonName != "first" {
			t.Fatalf("%s: the pair in use was dropped", name)
		}
		if _, err := New(Options{CertFile: certFile, KeyFile: keyFile}); err == nil || !strings.Contains(err.Error(), "encrypted with a passphrase") {
			t.Fatalf("%s: start with an encrypted key: %v", name, err)
		}
	}
}
