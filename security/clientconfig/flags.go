package clientconfig

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// PasswordEnv is the environment variable Resolve takes the SASL password
// from when neither --sasl-password-file nor the properties file gives one.
const PasswordEnv = "COHORT_SASL_PASSWORD"

// maxSecret bounds what ReadSecret reads: a password or token, not a file
// given by mistake.
const maxSecret = 64 << 10

// RegisterFlags adds the security flags to fs, bound to c: --tls,
// --tls-ca-file, --tls-cert-file, --tls-key-file, --tls-server-name,
// --sasl-mechanism, --sasl-username, --sasl-password-file,
// --oauth-token-file and --command-config. There is no flag for a password
// or a token: command lines are visible to every user of the machine (ps,
// /proc) and end up in shell histories. Call Resolve after parsing.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.TLS, "tls", c.TLS, "connect with TLS")
	fs.StringVar(&c.CAFile, "tls-ca-file", c.CAFile, "PEM `file` of the CAs that verify the server (default: the system's)")
	fs.StringVar(&c.CertFile, "tls-cert-file", c.CertFile, "PEM client certificate `file` for mTLS (with --tls-key-file)")
	fs.StringVar(&c.KeyFile, "tls-key-file", c.KeyFile, "PEM private key `file` of --tls-cert-file (unencrypted)")
	fs.StringVar(&c.ServerName, "tls-server-name", c.ServerName, "`name` the server certificate must carry (default: the host dialed)")
	fs.StringVar(&c.Mechanism, "sasl-mechanism", c.Mechanism, "SASL `mechanism`: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER")
	fs.StringVar(&c.Username, "sasl-username", c.Username, "SASL `user` (PLAIN, SCRAM)")
	fs.StringVar(&c.PasswordFile, "sasl-password-file", c.PasswordFile, "`file` holding the SASL password, - for standard input (default: $"+PasswordEnv+")")
	fs.StringVar(&c.TokenFile, "oauth-token-file", c.TokenFile, "`file` holding the OAUTHBEARER token, read again at every authentication")
	fs.StringVar(&c.PropertiesFile, "command-config", c.PropertiesFile, "Kafka client properties `file` (security.protocol, sasl.*, ssl.*); flags win over it")
}

// Resolve completes c after flag parsing and validates it: it reads
// PasswordFile (standard input for "-"), merges PropertiesFile under the
// settings given explicitly (a non-empty field wins; --tls can turn TLS on,
// not off), takes the password from $COHORT_SASL_PASSWORD when PLAIN or
// SCRAM still has none, and checks the result as Validate does. Call it
// once: it consumes standard input.
func (c *Config) Resolve() error { return c.resolve(os.Stdin, os.LookupEnv) }

// ResolveOpts is Resolve, then Opts: what a program that registered the
// flags calls after parsing them to get its client options.
func (c *Config) ResolveOpts() ([]kgo.Opt, error) {
	if err := c.Resolve(); err != nil {
		return nil, err
	}
	return c.Opts()
}

func (c *Config) resolve(stdin io.Reader, lookupEnv func(string) (string, bool)) error {
	explicit := *c
	if explicit.PasswordFile != "" {
		pw, err := ReadSecret(explicit.PasswordFile, stdin)
		if err != nil {
			return fmt.Errorf("SASL password: %w", err)
		}
		explicit.Password = pw
	}
	merged := explicit
	if explicit.PropertiesFile != "" {
		p, err := LoadPropertiesFile(explicit.PropertiesFile)
		if err != nil {
			return err
		}
		merged = p.overlay(explicit)
	}
	switch merged.mechanism() {
	case MechanismPlain, MechanismSCRAMSHA256, MechanismSCRAMSHA512:
		if merged.Password == "" {
			if v, ok := lookupEnv(PasswordEnv); ok {
				merged.Password = v
			}
		}
	}
	if err := merged.Validate(); err != nil {
		return SettingsError{err}
	}
	*c = merged
	return nil
}

// SettingsError is Resolve's error for settings that do not go together (what
// Validate reports), as opposed to a file that could not be read: a program
// can take it for a usage error.
type SettingsError struct{ Err error }

func (e SettingsError) Error() string { return e.Err.Error() }
func (e SettingsError) Unwrap() error { return e.Err }

// overlay returns base with every setting that top gives replacing base's.
func (base Config) overlay(top Config) Config {
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	out := base
	out.TLS = base.TLS || top.TLS
	out.InsecureSkipVerify = base.InsecureSkipVerify || top.InsecureSkipVerify
	set(&out.CAFile, top.CAFile)
	set(&out.CertFile, top.CertFile)
	set(&out.KeyFile, top.KeyFile)
	set(&out.ServerName, top.ServerName)
	set(&out.Mechanism, top.Mechanism)
	set(&out.Username, top.Username)
	set(&out.Password, top.Password)
	set(&out.Token, top.Token)
	set(&out.TokenFile, top.TokenFile)
	set(&out.PasswordFile, top.PasswordFile)
	set(&out.PropertiesFile, top.PropertiesFile)
	return out
}

// ReadSecret reads a password from the file name, or from stdin when name
// is "-", and drops one trailing newline (\n or \r\n), as left by echo or
// an editor; other white space is part of the secret. An empty secret is an
// error. Errors never hold the secret.
func ReadSecret(name string, stdin io.Reader) (string, error) {
	var r io.Reader
	if name == "-" {
		if stdin == nil {
			return "", errors.New("no standard input")
		}
		r = stdin
		name = "standard input"
	} else {
		f, err := os.Open(name)
		if err != nil {
			return "", err
		}
		defer f.Close()
		r = f
	}
	b, over, err := readAtMost(r, maxSecret)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", name, err)
	}
	if over {
		return "", fmt.Errorf("%s holds more than %d bytes: not a password", name, maxSecret)
	}
	s := strings.TrimSuffix(string(b), "\n")
	if len(s) < len(b) {
		s = strings.TrimSuffix(s, "\r")
	}
	if s == "" {
		return "", fmt.Errorf("%s is empty", name)
	}
	return s, nil
}

// readAtMost reads r to its end, or up to limit+1 bytes: over is true, and
// b incomplete, when r holds more than limit bytes.
func readAtMost(r io.Reader, limit int) (b []byte, over bool, err error) {
	b, err = io.ReadAll(io.LimitReader(r, int64(limit)+1))
	return b, len(b) > limit, err
}

// readFileAtMost reads the file name of at most limit bytes, a whole
// number of KiB or MiB; a larger file is an error that names the file, the
// limit and what the file should have been (kind), never the content.
func readFileAtMost(name string, limit int, kind string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, over, err := readAtMost(f, limit)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if over {
		size := fmt.Sprintf("%d KiB", limit>>10)
		if limit >= 1<<20 {
			size = fmt.Sprintf("%d MiB", limit>>20)
		}
		return nil, fmt.Errorf("%s is larger than %s, too large for %s", name, size, kind)
	}
	return b, nil
}
