// Package testpki makes throw-away certificate authorities and certificates
// for tests: a CA, server certificates for 127.0.0.1/localhost and client
// certificates with a chosen subject, written as PEM files.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a test certificate authority.
type CA struct {
	Cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	CertPEM []byte
	// CertFile is the CA certificate as a PEM file.
	CertFile string
	dir      string
	serial   int64
}

// NewCA makes a CA whose files live in t.TempDir().
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &CA{Cert: cert, key: key, dir: t.TempDir(), serial: 1}
	ca.CertPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	ca.CertFile = filepath.Join(ca.dir, "ca.pem")
	if err := os.WriteFile(ca.CertFile, ca.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return ca
}

// Pool is a cert pool holding the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Pair is an issued certificate and its key, as PEM files.
type Pair struct {
	CertFile, KeyFile string
	TLS               tls.Certificate
}

// Server issues a server certificate for 127.0.0.1, ::1 and localhost.
func (ca *CA) Server(t testing.TB, name string) Pair {
	return ca.issue(t, pkix.Name{CommonName: name}, true, time.Now().Add(24*time.Hour))
}

// ServerUntil issues a server certificate for 127.0.0.1, ::1 and localhost
// that expires at notAfter.
func (ca *CA) ServerUntil(t testing.TB, name string, notAfter time.Time) Pair {
	return ca.issue(t, pkix.Name{CommonName: name}, true, notAfter)
}

// Client issues a client certificate with the given subject.
func (ca *CA) Client(t testing.TB, subject pkix.Name) Pair {
	return ca.issue(t, subject, false, time.Now().Add(24*time.Hour))
}

func (ca *CA) issue(t testing.TB, subject pkix.Name, server bool, notAfter time.Time) Pair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial),
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		tmpl.DNSNames = []string{"localhost"}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	base := filepath.Join(ca.dir, subject.CommonName+"-"+big.NewInt(ca.serial).String())
	p := Pair{CertFile: base + ".pem", KeyFile: base + "-key.pem"}
	if err := os.WriteFile(p.CertFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.KeyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	p.TLS, err = tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// ClientConfig is a client TLS configuration trusting the CA, presenting
// pair if given.
func (ca *CA) ClientConfig(pair *Pair) *tls.Config {
	cfg := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	if pair != nil {
		cfg.Certificates = []tls.Certificate{pair.TLS}
	}
	return cfg
}

// ServeHandshakes serves TLS with pair on 127.0.0.1, offering HTTP/2 as
// etcd does, and returns its address: each connection completes its
// handshake, is sent one byte (a client waiting for data after the
// handshake is not left waiting; an HTTP/2 client reads no preface) and is
// held until the client closes it or 30 s pass. It stops when the test
// ends.
func ServeHandshakes(t testing.TB, pair Pair) string {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair.TLS}, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(30 * time.Second))
				if c.(*tls.Conn).Handshake() == nil {
					c.Write([]byte{0})
					c.Read(make([]byte, 1))
				}
			}()
		}
	}()
	return l.Addr().String()
}
