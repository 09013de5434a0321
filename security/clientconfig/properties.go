package clientconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// maxPropertiesFile bounds what is read of a properties file: a few
// hundred bytes of settings in practice, so a larger file is a wrong path
// (a log, /dev/zero) that must fail rather than be read whole.
const maxPropertiesFile = 1 << 20

// LoadPropertiesFile reads a Kafka client properties file; see
// LoadProperties.
func LoadPropertiesFile(path string) (Config, error) {
	b, err := readFileAtMost(path, maxPropertiesFile, "a properties file")
	if err != nil {
		return Config{}, fmt.Errorf("command config: %w", err)
	}
	c, err := LoadProperties(bytes.NewReader(b))
	if err != nil {
		return Config{}, fmt.Errorf("command config %s: %w", path, err)
	}
	return c, nil
}

// LoadProperties reads Kafka client properties (java.util.Properties text)
// and returns their security settings, as Kafka's tools read the file given
// to --command-config. It reads:
//
//   - security.protocol: PLAINTEXT (the default), SSL, SASL_PLAINTEXT or
//     SASL_SSL, in any case;
//   - sasl.mechanism (librdkafka also spells it sasl.mechanisms); as in
//     Kafka it is required with a SASL protocol, whose default GSSAPI is
//     not supported here;
//   - sasl.jaas.config with Kafka's PlainLoginModule or ScramLoginModule
//     (username and password options) or OAuthBearerLoginModule (whose
//     options are ignored: the token comes from --oauth-token-file);
//     librdkafka's sasl.username and sasl.password;
//   - librdkafka's ssl.ca.location, ssl.certificate.location and
//     ssl.key.location, and Java's ssl.truststore.location and
//     ssl.keystore.location when their type (ssl.truststore.type,
//     ssl.keystore.type) is PEM; Java's default type JKS and PKCS12 are
//     refused with an error, as are encrypted keys (ssl.key.password) and
//     PEM given inline;
//   - ssl.endpoint.identification.algorithm: https (the default); an empty
//     value, which turns off host name verification in Kafka, is refused
//     (set --tls-server-name to the name the certificate carries instead);
//   - librdkafka's enable.ssl.certificate.verification=false sets
//     InsecureSkipVerify.
//
// As in Kafka, ssl.* settings are ignored with a protocol without TLS and
// sasl.* settings with one without SASL. Other keys are ignored: such files
// usually hold client settings too.
func LoadProperties(r io.Reader) (Config, error) {
	props, err := parseJavaProperties(r)
	if err != nil {
		return Config{}, err
	}
	return fromProperties(props)
}

func fromProperties(props map[string]string) (Config, error) {
	var c Config
	var useSASL bool
	switch p := strings.ToUpper(strings.TrimSpace(props["security.protocol"])); p {
	case "", "PLAINTEXT":
	case "SSL":
		c.TLS = true
	case "SASL_PLAINTEXT":
		useSASL = true
	case "SASL_SSL":
		c.TLS, useSASL = true, true
	default:
		return Config{}, fmt.Errorf("security.protocol %s: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", quoteWord(p))
	}
	if c.TLS {
		if err := c.tlsFromProperties(props); err != nil {
			return Config{}, err
		}
	}
	if useSASL {
		if err := c.saslFromProperties(props); err != nil {
			return Config{}, err
		}
	}
	return c, nil
}

// quoteWord quotes a setting's value for an error if it looks like the
// word such a setting takes (see settingWord), and otherwise says that the
// value is not shown.
func quoteWord(v string) string {
	if !settingWord(v) {
		return valueNotShown
	}
	return strconv.Quote(v)
}

const valueNotShown = "(value not shown: not a setting name)"

// settingWord reports whether v looks like the word a setting such as
// security.protocol takes: letters, digits, '-', '_' and '.', at most 32
// of them. A value that is not may be two lines run together (a line
// ending in a backslash continues on the next) whose second holds a
// password, so errors do not show it.
func settingWord(v string) bool {
	if len(v) > 32 {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// pemStore returns the location of a Java trust or key store (prefix
// ssl.truststore or ssl.keystore) if it is a PEM file.
func pemStore(props map[string]string, prefix string) (string, error) {
	loc := props[prefix+".location"]
	if loc == "" {
		return "", nil
	}
	typ := strings.ToUpper(strings.TrimSpace(props[prefix+".type"]))
	if typ == "" {
		typ = "JKS" // Kafka's default
	}
	if typ != "PEM" {
		if !settingWord(typ) {
			typ = valueNotShown
		}
		return "", fmt.Errorf("%s.type %s is not supported: convert the store to PEM files and set %s.type=PEM", prefix, typ, prefix)
	}
	return loc, nil
}

func (c *Config) tlsFromProperties(props map[string]string) error {
	for _, k := range []string{"ssl.truststore.certificates", "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.ca.pem", "ssl.certificate.pem", "ssl.key.pem"} {
		if props[k] != "" {
			return fmt.Errorf("%s (PEM given inline) is not supported: put it in a file", k)
		}
	}
	if props["ssl.key.password"] != "" {
		return errors.New("ssl.key.password is set: encrypted private keys are not supported, use an unencrypted PEM key file")
	}
	trust, err := pemStore(props, "ssl.truststore")
	if err != nil {
		return err
	}
	c.CAFile = props["ssl.ca.location"]
	if trust != "" {
		if c.CAFile != "" && c.CAFile != trust {
			return errors.New("ssl.ca.location and ssl.truststore.location name different files")
		}
		c.CAFile = trust
	}
	keystore, err := pemStore(props, "ssl.keystore")
	if err != nil {
		return err
	}
	c.CertFile, c.KeyFile = props["ssl.certificate.location"], props["ssl.key.location"]
	if keystore != "" {
		// A Java PEM key store holds the key and its certificate chain.
		if c.CertFile != "" || c.KeyFile != "" {
			return errors.New("ssl.keystore.location and ssl.certificate.location/ssl.key.location are both set")
		}
		c.CertFile, c.KeyFile = keystore, keystore
	}
	if alg, ok := props["ssl.endpoint.identification.algorithm"]; ok {
		switch strings.ToLower(strings.TrimSpace(alg)) {
		case "https":
		case "", "none":
			return errors.New("ssl.endpoint.identification.algorithm is empty: turning off host name verification is not supported; set --tls-server-name to the name in the server certificate instead")
		default:
			return fmt.Errorf("ssl.endpoint.identification.algorithm %s: want https", quoteWord(alg))
		}
	}
	switch v := strings.ToLower(strings.TrimSpace(props["enable.ssl.certificate.verification"])); v {
	case "", "true":
	case "false":
		c.InsecureSkipVerify = true
	default:
		return fmt.Errorf("enable.ssl.certificate.verification %s: want true or false", quoteWord(v))
	}
	return nil
}

func (c *Config) saslFromProperties(props map[string]string) error {
	mech := props["sasl.mechanism"]
	if mech == "" {
		mech = props["sasl.mechanisms"] // librdkafka
	}
	c.Mechanism = strings.ToUpper(strings.TrimSpace(mech))
	if c.Mechanism == "" {
		return errors.New("security.protocol is SASL but sasl.mechanism is not set (Kafka's default, GSSAPI, is not supported)")
	}
	user, pass := props["sasl.username"], props["sasl.password"]
	if jaas := props["sasl.jaas.config"]; jaas != "" {
		module, opts, err := parseJAAS(jaas)
		if err != nil {
			return fmt.Errorf("sasl.jaas.config: %w", err)
		}
		if err := moduleServes(module, c.Mechanism); err != nil {
			return fmt.Errorf("sasl.jaas.config: %w", err)
		}
		if c.Mechanism != MechanismOAuthBearer {
			ju, jp := opts["username"], opts["password"]
			if (user != "" && user != ju) || (pass != "" && pass != jp) {
				return errors.New("sasl.jaas.config and sasl.username/sasl.password disagree")
			}
			user, pass = ju, jp
		}
	}
	c.Username, c.Password = user, pass
	return nil
}

// Kafka's client login modules.
const (
	plainModule = "org.apache.kafka.common.security.plain.PlainLoginModule"
	scramModule = "org.apache.kafka.common.security.scram.ScramLoginModule"
	oauthModule = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
)

// javaClassName matches a fully qualified Java class name (a.b.C).
var javaClassName = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*(\.[A-Za-z_$][A-Za-z0-9_$]*)+$`)

// moduleServes fails unless the login module provides credentials for the
// mechanism (as Kafka's SASL client would find when it authenticates).
func moduleServes(module, mech string) error {
	want := map[string]string{
		MechanismPlain:       plainModule,
		MechanismSCRAMSHA256: scramModule,
		MechanismSCRAMSHA512: scramModule,
		MechanismOAuthBearer: oauthModule,
	}[mech]
	switch module {
	case plainModule, scramModule, oauthModule:
	default:
		// Named only when it looks like a Java class name: the first
		// word of a mangled value could be something else entirely.
		name := "(the first word of the entry)"
		if javaClassName.MatchString(module) {
			name = module
		}
		return fmt.Errorf("login module %s is not supported: use %s, %s or %s", name, plainModule, scramModule, oauthModule)
	}
	if want != "" && module != want {
		return fmt.Errorf("login module %s does not serve SASL %s", module, mech)
	}
	return nil
}

// parseJAAS parses the value of sasl.jaas.config, which for a client holds
// exactly one entry:
//
//	<login module class> <control flag> (<option>=<value>)*;
//
// The tokens are Kafka's (JaasConfig): blanks and control characters
// separate them; a value is a word or a string in single or double quotes,
// with backslash escapes; '/' starts a comment ("//" or a lone '/' to the
// end of the line, "/* ... */"). Errors never quote what the value holds:
// a word where an option name should be may be the rest of a password with
// a blank in it (password=Hunter2 Secret;), so an option is named by its
// position, and by its key only when that is a key Kafka's login modules
// know (see jaasOption).
func parseJAAS(s string) (module string, opts map[string]string, err error) {
	toks, err := jaasTokens(s)
	if err != nil {
		return "", nil, err
	}
	next := func() (jaasToken, bool) {
		if len(toks) == 0 {
			return jaasToken{}, false
		}
		t := toks[0]
		toks = toks[1:]
		return t, true
	}
	t, ok := next()
	if !ok {
		return "", nil, errors.New("login module not specified")
	}
	if t.kind != tokWord {
		return "", nil, errors.New("login module class expected first")
	}
	module = t.text
	if t, ok = next(); !ok || t.kind != tokWord {
		return "", nil, errors.New("login module control flag not specified")
	}
	switch strings.ToUpper(t.text) {
	case "REQUIRED", "REQUISITE", "SUFFICIENT", "OPTIONAL":
	default:
		return "", nil, errors.New("invalid login module control flag")
	}
	opts = map[string]string{}
	prev := "" // the last option read, as jaasOption names it
	for n := 1; ; n++ {
		after := ""
		if prev != "" {
			after = " (after " + prev + ")"
		}
		t, ok = next()
		if !ok {
			return "", nil, errors.New("entry not terminated by a semicolon")
		}
		if t.kind == tokSemicolon {
			break
		}
		if t.kind != tokWord && t.kind != tokQuoted {
			return "", nil, fmt.Errorf("option %d%s: option name expected", n, after)
		}
		key := t.text
		if eq, ok := next(); !ok || eq.kind != tokEquals {
			return "", nil, fmt.Errorf("option %d%s: no '=' after its name (a value holding blanks or any of =;'\"/ must be quoted)", n, after)
		}
		v, ok := next()
		if !ok || (v.kind != tokWord && v.kind != tokQuoted) {
			return "", nil, fmt.Errorf("value not specified for %s%s", jaasOption(n, key), after)
		}
		opts[key] = v.text
		prev = jaasOption(n, key)
	}
	if len(toks) > 0 {
		return "", nil, errors.New("more than one login module: a client uses exactly one")
	}
	return module, opts, nil
}

// jaasOption names the nth option of a JAAS entry in an error: by its key
// when the key is one Kafka's client login modules read (not a secret), by
// its position otherwise (an unknown key may be a misplaced piece of a value).
func jaasOption(n int, key string) string {
	switch key {
	case "username", "password", "unsecuredLoginStringClaim_sub", "unsecuredLoginLifetimeSeconds",
		"clientId", "clientSecret", "scope":
		return fmt.Sprintf("option %q", key)
	}
	return fmt.Sprintf("option %d", n)
}

type tokKind int

const (
	tokWord tokKind = iota
	tokQuoted
	tokEquals
	tokSemicolon
)

type jaasToken struct {
	kind tokKind
	text string
}

func jaasTokens(s string) ([]jaasToken, error) {
	var toks []jaasToken
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c <= ' ':
			i++
		case c == '/':
			if i+1 < len(s) && s[i+1] == '*' {
				end := strings.Index(s[i+2:], "*/")
				if end < 0 {
					return nil, errors.New("unterminated /* comment")
				}
				i += 2 + end + 2
			} else {
				end := strings.IndexAny(s[i:], "\n\r")
				if end < 0 {
					end = len(s) - i
				}
				i += end
			}
		case c == '=':
			toks = append(toks, jaasToken{kind: tokEquals})
			i++
		case c == ';':
			toks = append(toks, jaasToken{kind: tokSemicolon})
			i++
		case c == '"' || c == '\'':
			text, n, err := jaasQuoted(s[i:])
			if err != nil {
				return nil, err
			}
			toks = append(toks, jaasToken{kind: tokQuoted, text: text})
			i += n
		default:
			j := i
			for j < len(s) && s[j] > ' ' && !strings.ContainsRune(`=;"'/`, rune(s[j])) {
				j++
			}
			toks = append(toks, jaasToken{kind: tokWord, text: s[i:j]})
			i = j
		}
	}
	return toks, nil
}

// jaasQuoted reads the quoted string that s starts with and returns its
// text and length. As in java.io.StreamTokenizer, a string ends at its
// closing quote or at the end of the line, and a backslash escapes the
// next character (\n, \t, \r, \b, \f, \a, \v, up to three octal digits, or
// the character itself).
func jaasQuoted(s string) (string, int, error) {
	q := s[0]
	var b strings.Builder
	i := 1
	for i < len(s) {
		c := s[i]
		switch {
		case c == q:
			return b.String(), i + 1, nil
		case c == '\n' || c == '\r':
			return b.String(), i, nil
		case c == '\\' && i+1 < len(s):
			i++
			e := s[i]
			switch e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'a':
				b.WriteByte('\a')
			case 'v':
				b.WriteByte('\v')
			default:
				if e >= '0' && e <= '7' {
					n, max := 0, 3
					if e > '3' {
						max = 2
					}
					j := i
					for j < len(s) && j-i < max && s[j] >= '0' && s[j] <= '7' {
						n = n*8 + int(s[j]-'0')
						j++
					}
					b.WriteRune(rune(n))
					i = j
					continue
				}
				b.WriteByte(e)
			}
			i++
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), i, nil // end of input closes the string
}
