package server

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// selfSigned returns a server TLS config for 127.0.0.1 and a client config
// trusting it.
func selfSigned(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "cohort-test"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}},
		&tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
}

func TestTLSWithKgo(t *testing.T) {
	serverTLS, clientTLS := selfSigned(t)
	ts := startServer(t, func(c *Config) { c.TLS = serverTLS })
	cl := ts.kgoClient(t, kgo.DialTLSConfig(clientTLS))
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.Generation = "g", 27
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 27 {
		t.Fatalf("error %d, want the fake's 27", resp.ErrorCode)
	}
	// A plaintext client gets no Kafka answer.
	c := ts.dial(t)
	c.writeRaw(frame(18, 0, 1, "plain", nil))
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, body, err := c.recvFrame(); err == nil && len(body) > 0 {
		if (&kmsg.ApiVersionsResponse{}).ReadFrom(body) == nil {
			t.Fatal("a plaintext ApiVersions was answered on a TLS listener")
		}
	}
}

func TestLargeFrame(t *testing.T) {
	ts := startServer(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 200<<10/16) // 200 KiB: the incremental read path
	req := kmsg.NewPtrJoinGroupRequest()
	req.SetVersion(9)
	req.Group = "big"
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: big}}
	ts.dial(t).roundTrip(req)
	calls := ts.groups.snapshot()
	if len(calls) != 1 || !bytes.Equal(calls[0].req.(*kmsg.JoinGroupRequest).Protocols[0].Metadata, big) {
		t.Fatal("the 200 KiB JoinGroup metadata did not arrive intact")
	}
}
