// Package clientconfig is the one place where the security settings of
// cohort's own Kafka clients become franz-go options: TLS (with a private CA
// and client certificates for mTLS) and SASL PLAIN, SCRAM-SHA-256,
// SCRAM-SHA-512 and OAUTHBEARER. Package member and the recipes on it, the
// bench and the cohort CLI all take their settings from here.
//
// Settings come from code (a Config literal), from a Kafka client
// properties file, the --command-config of Kafka's own tools
// (LoadProperties), or from command-line flags (RegisterFlags, then
// Resolve). Secrets never come from a flag: a password is read from a file,
// from standard input or from $COHORT_SASL_PASSWORD, an OAUTHBEARER token
// from a file that is read again at every authentication (so a sidecar can
// renew it), and neither ever appears in an error message.
package clientconfig

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/cohort-dev/cohort/security/tlsconfig"
)

// SASL mechanism names, as Kafka spells them (sasl.mechanism).
const (
	MechanismPlain       = "PLAIN"
	MechanismSCRAMSHA256 = "SCRAM-SHA-256"
	MechanismSCRAMSHA512 = "SCRAM-SHA-512"
	MechanismOAuthBearer = "OAUTHBEARER"
)

// Config holds the security settings of one client. The zero value is a
// plaintext connection without authentication.
type Config struct {
	// TLS encrypts the connection (security.protocol SSL or SASL_SSL).
	TLS bool
	// CAFile is a PEM file of the CAs that verify the server certificate
	// (default: the system's roots).
	CAFile string
	// CertFile and KeyFile are this client's PEM certificate and
	// unencrypted private key, for servers that require mTLS. They may
	// name the same file.
	CertFile, KeyFile string
	// ServerName is the name the server certificate must carry (default:
	// the host of each address dialed).
	ServerName string
	// InsecureSkipVerify accepts any server certificate. It is for tests
	// only: it defeats TLS against an active attacker. No flag sets it.
	InsecureSkipVerify bool

	// Mechanism is the SASL mechanism: "" (no SASL), PLAIN, SCRAM-SHA-256,
	// SCRAM-SHA-512 or OAUTHBEARER (case does not matter).
	Mechanism string
	// Username and Password authenticate PLAIN and SCRAM. Password is set
	// in code, read from PasswordFile or $COHORT_SASL_PASSWORD by Resolve,
	// or taken from a properties file; never from a flag.
	Username string
	Password string
	// Token is a static OAUTHBEARER token; TokenFile names a file holding
	// one, read again at every authentication (new connections and
	// KIP-368 re-authentication). Set one of them.
	Token     string
	TokenFile string

	// PasswordFile names a file that holds Password ("-": standard
	// input). Resolve reads it; one trailing newline is dropped.
	PasswordFile string
	// PropertiesFile is a Kafka client properties file (--command-config)
	// that Resolve reads; settings given explicitly win over it.
	PropertiesFile string
}

// ExposedSecretFiles returns the files of c that hold a secret (the
// password file, the token file, a properties file that sets a password)
// and that other users of the machine may read (any group or other
// permission bit): tools warn about them, as ssh does about a private key
// anyone can read. Standard input ("-") and unreadable files are left out.
func (c Config) ExposedSecretFiles() []string {
	var out []string
	for _, name := range []string{c.PasswordFile, c.TokenFile} {
		if name != "" && name != "-" && exposed(name) {
			out = append(out, name)
		}
	}
	if name := c.PropertiesFile; name != "" && exposed(name) {
		if p, err := LoadPropertiesFile(name); err == nil && (p.Password != "" || p.Token != "") {
			out = append(out, name)
		}
	}
	return out
}

// Exposed reports whether the secret file name is a regular file that users
// other than its owner may read or write (any group or other permission
// bit): a password file of etcd, say, beside those of ExposedSecretFiles.
func Exposed(name string) bool { return exposed(name) }

func exposed(name string) bool {
	fi, err := os.Stat(name)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o077 != 0
}

// Opts returns the kgo options that make a client use c: DialTLSConfig and
// SASL. A zero Config returns no options. It fails when the settings do not
// go together or a file cannot be read.
func (c Config) Opts() ([]kgo.Opt, error) {
	tc, err := c.TLSConfig()
	if err != nil {
		return nil, err
	}
	mech, err := c.SASLMechanism()
	if err != nil {
		return nil, err
	}
	var opts []kgo.Opt
	if tc != nil {
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if mech != nil {
		opts = append(opts, kgo.SASL(mech))
	}
	return opts, nil
}

// TLSConfig returns the client TLS configuration (TLS 1.2 at least), or nil
// when TLS is off. kgo sets ServerName per broker when it is empty; other
// users of the configuration must do the same.
func (c Config) TLSConfig() (*tls.Config, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if !c.TLS {
		return nil, nil
	}
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         c.ServerName,
		InsecureSkipVerify: c.InsecureSkipVerify,
	}
	if c.CAFile != "" {
		pem, err := tlsconfig.ReadPEMFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("TLS CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS CA file %s: no PEM certificate in it", c.CAFile)
		}
		tc.RootCAs = pool
	}
	if c.CertFile != "" {
		// The node's reader: both files bounded (tlsconfig.ReadPEMFile),
		// and a passphrase-protected key named as such.
		cert, err := tlsconfig.LoadKeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("TLS client certificate %s with key %s: %w", c.CertFile, c.KeyFile, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// maxTokenFile bounds what is read of an OAUTHBEARER token file: a node
// refuses a SASL token over 512 KiB (Kafka's sasl.server.max.receive.size
// by default), so a larger file is a wrong path, not a token.
const maxTokenFile = 512 << 10

// SASLMechanism returns the franz-go SASL mechanism, or nil without SASL.
func (c Config) SASLMechanism() (sasl.Mechanism, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	switch c.mechanism() {
	case MechanismPlain:
		return plain.Auth{User: c.Username, Pass: c.Password}.AsMechanism(), nil
	case MechanismSCRAMSHA256:
		return scram.Auth{User: c.Username, Pass: c.Password}.AsSha256Mechanism(), nil
	case MechanismSCRAMSHA512:
		return scram.Auth{User: c.Username, Pass: c.Password}.AsSha512Mechanism(), nil
	case MechanismOAuthBearer:
		token, file := c.Token, c.TokenFile
		return oauth.Oauth(func(context.Context) (oauth.Auth, error) {
			if file == "" {
				return oauth.Auth{Token: token}, nil
			}
			b, err := readFileAtMost(file, maxTokenFile, "a token")
			if err != nil {
				return oauth.Auth{}, fmt.Errorf("OAUTHBEARER token file: %w", err)
			}
			t := strings.TrimSpace(string(b))
			if t == "" {
				return oauth.Auth{}, fmt.Errorf("OAUTHBEARER token file %s is empty", file)
			}
			return oauth.Auth{Token: t}, nil
		}), nil
	}
	return nil, nil
}

func (c Config) mechanism() string { return strings.ToUpper(strings.TrimSpace(c.Mechanism)) }

// Validate reports settings that do not go together, such as a mechanism
// without its credentials, credentials without a mechanism, or TLS files
// with TLS off. It reads no file.
func (c Config) Validate() error {
	if !c.TLS && (c.CAFile != "" || c.CertFile != "" || c.KeyFile != "" || c.ServerName != "" || c.InsecureSkipVerify) {
		return errors.New("TLS settings (CA file, client certificate, server name) are given but TLS is off: add --tls (or security.protocol SSL / SASL_SSL)")
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return errors.New("a TLS client certificate needs both a certificate file and a key file")
	}
	hasToken := c.Token != "" || c.TokenFile != ""
	switch m := c.mechanism(); m {
	case "":
		if c.Username != "" || c.Password != "" || hasToken {
			return errors.New("SASL credentials are given but no SASL mechanism: set --sasl-mechanism (or sasl.mechanism)")
		}
	case MechanismPlain, MechanismSCRAMSHA256, MechanismSCRAMSHA512:
		if c.Username == "" {
			return fmt.Errorf("SASL %s needs a username (--sasl-username)", m)
		}
		if c.Password == "" {
			return fmt.Errorf("SASL %s needs a password: --sasl-password-file, $%s or the command config", m, PasswordEnv)
		}
		if hasToken {
			return fmt.Errorf("an OAUTHBEARER token is given but the SASL mechanism is %s", m)
		}
	case MechanismOAuthBearer:
		if !hasToken {
			return errors.New("SASL OAUTHBEARER needs a token (--oauth-token-file)")
		}
		if c.Token != "" && c.TokenFile != "" {
			return errors.New("SASL OAUTHBEARER: give a token or a token file, not both")
		}
		if c.Username != "" || c.Password != "" {
			return errors.New("SASL OAUTHBEARER authenticates with a token: a username or password is not used")
		}
	case "GSSAPI":
		return errors.New("SASL GSSAPI (Kerberos) is not supported: use PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER")
	default:
		return fmt.Errorf("unknown SASL mechanism %s: want PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER", quoteWord(c.Mechanism))
	}
	return nil
}
