// Package tlsconfig builds cohort's server TLS configuration from PEM files:
// the certificate and key (reloadable, so that a renewed certificate is
// served to new connections without a restart or a dropped connection), and
// the CA that verifies client certificates for mTLS.
package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
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

// Server is a server TLS configuration whose certificate can be reloaded.
type Server struct {
	opts Options
	cert atomic.Pointer[tls.Certificate]
	cfg  *tls.Config
}

// New loads the files and returns the configuration. TLS 1.2 is the
// minimum version.
func New(opts Options) (*Server, error) {
	if opts.CertFile == "" || opts.KeyFile == "" {
		return nil, errors.New("TLS needs both a certificate file and a key file")
	}
	s := &Server{opts: opts}
	if err := s.Reload(); err != nil {
		return nil, err
	}
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
			return nil, fmt.Errorf("TLS client auth %s needs a client CA file", opts.ClientAuth)
		}
		pem, err := os.ReadFile(opts.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("TLS client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS client CA %s: no PEM certificate in it", opts.ClientCAFile)
		}
		cfg.ClientCAs = pool
	} else if opts.ClientCAFile != "" {
		return nil, errors.New("a TLS client CA file is set but client auth is none: set it to requested or required")
	}
	s.cfg = cfg
	return s, nil
}

// Config is the tls.Config to serve with. It stays the same across
// reloads: its GetCertificate returns the current certificate.
func (s *Server) Config() *tls.Config { return s.cfg }

// RequiresClientCert reports whether every client must present a verified
// certificate.
func (s *Server) RequiresClientCert() bool { return s.cfg.ClientAuth == tls.RequireAndVerifyClientCert }

// Reload reads the certificate and key files again. On error the current
// certificate stays in use. Connections already established keep theirs;
// new handshakes get the new one.
func (s *Server) Reload() error {
	cert, err := tls.LoadX509KeyPair(s.opts.CertFile, s.opts.KeyFile)
	if err != nil {
		// The error names the files, never their contents.
		return fmt.Errorf("loading TLS certificate %s and key %s: %w", s.opts.CertFile, s.opts.KeyFile, err)
	}
	if cert.Leaf == nil && len(cert.Certificate) > 0 {
		cert.Leaf, _ = x509.ParseCertificate(cert.Certificate[0])
	}
	s.cert.Store(&cert)
	return nil
}

// Certificate returns the certificate being served.
func (s *Server) Certificate() *tls.Certificate { return s.cert.Load() }
