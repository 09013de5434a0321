// Package tlsconfig builds cohort's server TLS configuration from PEM files:
// the certificate and key, and the CAs that verify client certificates for
// mTLS. Both are reloadable, so that a renewed certificate is served, and a
// CA added to or removed from the trusted set takes effect, for new
// connections without a restart or a dropped connection (Kafka reloads a
// listener's keystore and truststore the same way, KIP-226).
package tlsconfig

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
)

// ClientAuth values of Options.ClientAuth, as Kafka's ssl.client.auth.
const (
	ClientAuthNone      = "none"
	ClientAuthRequested = "requested"
	ClientAuthRequired  = "required"
)

// Options names the PEM files of a server TLS configuration.
type Options struct {
	CertFile, KeyFile string
	// ClientCAFile holds the CAs that verify client certificates.
	ClientCAFile string
	// ClientAuth is none, requested or required (default none).
	ClientAuth string
}

// Server is a server TLS configuration whose certificate and client CAs
// can be reloaded.
type Server struct {
	opts Options
	cert atomic.Pointer[tls.Certificate]
	cfg  *tls.Config
	// verifying is the configuration each handshake uses when client
	// certificates are asked for: cfg with the client CAs last loaded
	// (cfg's GetConfigForClient returns it).
	verifying atomic.Pointer[tls.Config]
	// peers verifies other cohort nodes (PeerRoots).
	peers atomic.Pointer[x509.CertPool]
}

// New loads the files and returns the configuration. TLS 1.2 is the
// minimum version.
func New(opts Options) (*Server, error) {
	if opts.CertFile == "" || opts.KeyFile == "" {
		return nil, errors.New("TLS needs both a certificate file and a key file")
	}
	s := &Server{opts: opts}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return s.cert.Load(), nil
		},
	}
	switch opts.ClientAuth {
	case "", ClientAuthNone:
		cfg.ClientAuth = tls.NoClientCert
	case ClientAuthRequested:
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	case ClientAuthRequired:
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	default:
		return nil, fmt.Errorf("TLS client auth %q: want none, requested or required", opts.ClientAuth)
	}
	if cfg.ClientAuth != tls.NoClientCert {
		if opts.ClientCAFile == "" {
			return nil, fmt.Errorf("TLS client auth %s needs a client CA file (--tls-client-ca-file)", opts.ClientAuth)
		}
		cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.verifying.Load(), nil
		}
	} else if opts.ClientCAFile != "" {
		return nil, errors.New("a TLS client CA file is set but client auth is none: set it to requested or required")
	}
	s.cfg = cfg
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Config is the tls.Config to serve with. It stays the same across
// reloads: its GetCertificate returns the current certificate and, with
// client certificates, its GetConfigForClient the current client CAs.
// ClientCAs holds the CAs loaded first (read it to know that client
// certificates are verified, not which CAs are trusted now).
func (s *Server) Config() *tls.Config { return s.cfg }

// WithoutClientAuth is Config for a listener that asks for no client
// certificate (SASL_SSL), still serving the current certificate.
func (s *Server) WithoutClientAuth() *tls.Config {
	c := s.cfg.Clone()
	c.ClientAuth, c.ClientCAs, c.GetConfigForClient = tls.NoClientCert, nil, nil
	return c
}

// ClientCertIfGiven is Config for a listener where a client certificate is
// optional (the HTTP listener, whose browsers present none): one that is
// presented is verified against the current client CAs, and its absence is
// no error. Without client CAs it is WithoutClientAuth.
func (s *Server) ClientCertIfGiven() *tls.Config {
	if s.cfg.ClientAuth == tls.NoClientCert {
		return s.WithoutClientAuth()
	}
	c := s.cfg.Clone()
	c.ClientAuth = tls.VerifyClientCertIfGiven
	c.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		v := s.verifying.Load().Clone()
		v.ClientAuth = tls.VerifyClientCertIfGiven
		return v, nil
	}
	return c
}

// RequiresClientCert reports whether every client must present a verified
// certificate.
func (s *Server) RequiresClientCert() bool { return s.cfg.ClientAuth == tls.RequireAndVerifyClientCert }

// Reload reads the certificate, key and client CA files again. On any
// error nothing changes: the current certificate and CAs stay in use.
// Connections already established keep what they were verified with; new
// handshakes get the new certificate and are verified against the new CAs.
func (s *Server) Reload() error {
	cert, err := LoadKeyPair(s.opts.CertFile, s.opts.KeyFile)
	if err != nil {
		// The error names the files, never their contents.
		return fmt.Errorf("loading TLS certificate %s and key %s: %w", s.opts.CertFile, s.opts.KeyFile, err)
	}
	if cert.Leaf == nil && len(cert.Certificate) > 0 {
		cert.Leaf, _ = x509.ParseCertificate(cert.Certificate[0])
	}
	var verifying *tls.Config
	var caPEM []byte
	if s.cfg.ClientAuth != tls.NoClientCert {
		if caPEM, err = ReadPEMFile(s.opts.ClientCAFile); err != nil {
			return fmt.Errorf("TLS client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return fmt.Errorf("TLS client CA %s: no PEM certificate in it", s.opts.ClientCAFile)
		}
		if s.cfg.ClientCAs == nil {
			s.cfg.ClientCAs = pool // first load, before any handshake
		}
		verifying = s.cfg.Clone()
		verifying.ClientCAs, verifying.GetConfigForClient = pool, nil
	}
	s.cert.Store(&cert)
	if verifying != nil {
		s.verifying.Store(verifying)
	}
	s.peers.Store(peerRoots(cert, caPEM))
	return nil
}

// MaxPEMFile bounds the size of a certificate, key or CA file: a few
// kilobytes each in practice, and some hundreds for a large CA bundle
// (the system's, about 200 KiB). A larger file, or a path that reads
// without end (/dev/zero, by mistake), is refused after this many bytes
// instead of being read into memory whole.
const MaxPEMFile = 4 << 20

// ReadPEMFile reads a certificate, key or CA file of at most MaxPEMFile
// bytes. It works for pipes too (a shell's process substitution), which
// can be read only once. A file with a PEM block that does not decode
// whole is refused: Go's PEM readers skip such a block, so a file read
// while an editor or a script rewrote it in place loaded as if its last
// certificates were not there (a chain without its intermediate, a CA
// bundle short of a CA). Its errors name the file, never its content.
func ReadPEMFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxPEMFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxPEMFile {
		return nil, fmt.Errorf("%s: larger than %d MiB, too large for a PEM file", name, MaxPEMFile>>20)
	}
	if bad, all := cutBlocks(data); bad > 0 {
		return nil, fmt.Errorf("%s: %d of its %d PEM blocks are cut short or malformed (was it read while being written?)", name, bad, all)
	}
	return data, nil
}

// cutBlocks counts the PEM blocks data begins (a -----BEGIN line) and
// those of them that do not decode.
func cutBlocks(data []byte) (bad, all int) {
	// pem.Decode takes a BEGIN line only at the start of a line.
	all = bytes.Count(data, []byte("\n-----BEGIN "))
	if bytes.HasPrefix(data, []byte("-----BEGIN ")) {
		all++
	}
	good := 0
	for rest := data; ; good++ {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
	}
	return max(all-good, 0), all
}

// LoadKeyPair reads a certificate chain and its private key from two PEM
// files, as tls.LoadX509KeyPair, reading each through ReadPEMFile.
func LoadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	certPEM, err := ReadPEMFile(certFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := ReadPEMFile(keyFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil && encryptedKey(keyPEM) {
		// Go's own error reads as a malformed file.
		return cert, fmt.Errorf("%s: the private key is encrypted with a passphrase, which cohort cannot use: give it the key decrypted (openssl pkey -in KEY -out NEW), readable by its user only", keyFile)
	}
	return cert, err
}

// encryptedKey reports whether keyPEM holds a passphrase-protected private
// key: PKCS #8's ENCRYPTED PRIVATE KEY, or the older OpenSSL form whose
// Proc-Type header says ENCRYPTED.
func encryptedKey(keyPEM []byte) bool {
	for rest := keyPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return false
		}
		if b.Type == "ENCRYPTED PRIVATE KEY" || strings.Contains(b.Headers["Proc-Type"], "ENCRYPTED") {
			return true
		}
	}
}

// peerRoots is the pool that verifies other nodes of the same cluster when
// this node is their client (the web console): the system's CAs, those of
// the client CA file (caPEM: a private CA usually signs nodes and clients
// alike), and every certificate of this node's own certificate file (its
// chain, and the leaf itself for nodes sharing one self-signed
// certificate).
func peerRoots(cert tls.Certificate, caPEM []byte) *x509.CertPool {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	pool.AppendCertsFromPEM(caPEM)
	for _, der := range cert.Certificate {
		if c, err := x509.ParseCertificate(der); err == nil {
			pool.AddCert(c)
		}
	}
	return pool
}

// PeerRoots returns the CAs that verify the other nodes of this node's
// cluster, when it dials them as a client (the web console): the system's
// CAs, those of the client CA file, and the certificates of this node's own
// certificate file. It follows Reload.
func (s *Server) PeerRoots() *x509.CertPool { return s.peers.Load() }

// Certificate returns the certificate being served.
func (s *Server) Certificate() *tls.Certificate { return s.cert.Load() }
