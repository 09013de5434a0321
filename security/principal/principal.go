// Package principal maps a TLS client certificate to a Kafka principal,
// as Kafka's ssl.principal.mapping.rules do (KIP-371, SslPrincipalMapper):
// rules rewrite the certificate's subject DN, in Java's RFC 2253 form,
// into the principal's name.
package principal

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// ErrNoMatchingRule is wrapped by Map's error when no rule applies to a DN
// (Kafka's NoMatchingRule: the connection's authentication fails).
var ErrNoMatchingRule = errors.New("no principal mapping rule applies")

// Rules is a parsed ssl.principal.mapping.rules value: an ordered list of
// rules, each DEFAULT (the DN unchanged) or RULE:pattern/replacement/
// with an optional L or U case suffix. Rules are immutable and safe for
// concurrent use.
type Rules struct {
	rules []rule
}

type rule struct {
	isDefault            bool
	pattern, replacement string         // as written, for String
	re                   *regexp.Regexp // the pattern, for Java's replaceAll
	whole                *regexp.Regexp // the pattern matching the whole DN, Java's matches()
	tmpl                 template
	lower, upper         bool
}

// The rule grammar, Kafka's SslPrincipalMapper regular expressions in Go's
// syntax with Java's meaning of \s and '.' spelled out: a rule is DEFAULT,
// or RULE: then a pattern and a replacement each ended by '/' (a backslash
// escapes the next character, so "\/" is a '/' inside them; escapes stay
// in the text and mean what they mean in a Java regexp and replacement)
// then L or U; anything else is captured whole and rejected.
const (
	javaSpace   = `[ \t\n\x0B\f\r]`
	javaDot     = `[^\n\r\x{85}\x{2028}\x{2029}]`
	rulePattern = `(DEFAULT)|RULE:((\\` + javaDot + `|[^\\/])*)/((\\` + javaDot + `|[^\\/])*)/([LU]?)` + javaDot + `*?|(` + javaDot + `*?)`
)

var (
	// ruleSplitter finds the rules in the list: each with the blanks around
	// it and the comma after it. Commas inside a pattern or replacement
	// need no escape: a rule runs to its closing '/'.
	ruleSplitter = regexp.MustCompile(javaSpace + `*(` + rulePattern + `)` + javaSpace + `*(,` + javaSpace + `*|$)`)
	// ruleParser reads one rule; it must consume all of it.
	ruleParser = regexp.MustCompile(`\A(?:` + rulePattern + `)`)
)

// ParseRules parses a comma-separated list of rules with the syntax of
// Kafka's ssl.principal.mapping.rules, e.g.
//
//	RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT
//
// Blanks around rules and empty rules are ignored; "" is an empty list,
// with which every Map fails (Kafka's default value is "DEFAULT").
// Patterns are Go regular expressions (RE2: no back-references or
// look-around); replacements have Java's syntax ($1, ${name}, \$ for a
// literal '$'), and a $n past the pattern's groups is literal text, as
// Kafka makes it.
//
// Stricter than Kafka, by decision: a replacement Java would reject when
// the rule first matches (a trailing '\', "$x", ${name} of no group, $n in
// a pattern without groups) is an error here, at configuration time.
func ParseRules(s string) (*Rules, error) {
	s = strings.TrimFunc(s, func(r rune) bool { return r <= ' ' }) // Java's String.trim
	var rs Rules
	for _, m := range ruleSplitter.FindAllStringSubmatch(s, -1) {
		text := m[1]
		p := ruleParser.FindStringSubmatchIndex(text)
		if p == nil || p[1] != len(text) {
			end := 0
			if p != nil {
				end = p[1]
			}
			return nil, fmt.Errorf("principal: invalid rule %q: unexpected %q", text, text[end:])
		}
		switch {
		case p[2] >= 0:
			rs.rules = append(rs.rules, rule{isDefault: true})
		case p[4] >= 0:
			r, err := newRule(text[p[4]:p[5]], text[p[8]:p[9]], text[p[12]:p[13]])
			if err != nil {
				return nil, fmt.Errorf("principal: invalid rule %q: %w", text, err)
			}
			rs.rules = append(rs.rules, r)
		}
		// Otherwise the rule is empty: ignored.
	}
	return &rs, nil
}

func newRule(pattern, replacement, suffix string) (rule, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return rule{}, err
	}
	// Compiled on its own first: wrapping could balance a stray ')'.
	whole, err := regexp.Compile(`\A(?:` + pattern + `)\z`)
	if err != nil {
		return rule{}, err
	}
	tmpl, err := parseTemplate(replacement, re)
	if err != nil {
		return rule{}, err
	}
	return rule{pattern: pattern, replacement: replacement, re: re, whole: whole, tmpl: tmpl,
		lower: suffix == "L", upper: suffix == "U"}, nil
}

// Map returns the principal name for a DN: the result of the first rule
// that applies. DEFAULT applies to every DN and returns it unchanged; a
// RULE applies when its pattern matches the whole DN, and returns the DN
// with every match of the pattern replaced (Java's String.replaceAll), then
// lower- or upper-cased for L or U. No rule applying is an error wrapping
// ErrNoMatchingRule.
//
// Differences from Java that remain: Java's replaceAll also replaces an
// empty match right after a previous match, so Kafka maps DN "CN=a" with
// RULE:.*/x/ to "xx" where this gives "x" (anchor with ^...$ and both give
// "x"); case mapping is Go's (Unicode simple case mapping, while Java's
// toUpperCase makes "SS" of "ß").
func (r *Rules) Map(dn string) (string, error) {
	if r != nil {
		for i := range r.rules {
			if name, ok := r.rules[i].apply(dn); ok {
				return name, nil
			}
		}
	}
	return "", fmt.Errorf("%w: DN %q, rules %s", ErrNoMatchingRule, dn, r)
}

func (rl *rule) apply(dn string) (string, bool) {
	if rl.isDefault {
		return dn, true
	}
	if !rl.whole.MatchString(dn) {
		return "", false
	}
	var out strings.Builder
	last := 0
	for _, m := range rl.re.FindAllStringSubmatchIndex(dn, -1) {
		out.WriteString(dn[last:m[0]])
		rl.tmpl.expand(&out, dn, m)
		last = m[1]
	}
	out.WriteString(dn[last:])
	name := out.String()
	switch {
	case rl.lower:
		name = strings.ToLower(name)
	case rl.upper:
		name = strings.ToUpper(name)
	}
	return name, true
}

// String lists the rules as Kafka prints them, e.g.
// "[RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT]".
func (r *Rules) String() string {
	var parts []string
	if r != nil {
		for _, rl := range r.rules {
			switch {
			case rl.isDefault:
				parts = append(parts, "DEFAULT")
			case rl.lower:
				parts = append(parts, "RULE:"+rl.pattern+"/"+rl.replacement+"/L")
			case rl.upper:
				parts = append(parts, "RULE:"+rl.pattern+"/"+rl.replacement+"/U")
			default:
				parts = append(parts, "RULE:"+rl.pattern+"/"+rl.replacement)
			}
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// FromCertificate returns the principal ("User:<name>") of a verified
// client certificate.
//
// With nil rules the name is the subject's CN, and a certificate without
// one, or with more than one, is an error: cohort's default. Kafka's
// default is the rule DEFAULT, the whole DN; pass ParseRules("DEFAULT")
// for that.
//
// With rules, they map the subject DN as Java's X500Principal.getName()
// prints it (RFC 2253): RDNs most specific first, keywords CN, C, L, ST,
// O, OU, STREET, DC and UID, other attributes as OID=#hex of their DER
// value, and backslash escapes of , = + < > # ; " \ and of leading and
// trailing blanks, e.g. "CN=alice,OU=eng,O=acme,C=US". This is built from
// the certificate's raw subject, not with pkix.Name.String, which differs
// from Java: it merges repeated attributes (two OUs become "OU=a+OU=b"),
// reorders attributes, does not name DC or UID, names SERIALNUMBER and
// POSTALCODE, and re-encodes the hex of unnamed values.
//
// A rule mapping the DN to an empty name is an error (Kafka would accept
// the empty name, which no ACL can name).
func FromCertificate(cert *x509.Certificate, r *Rules) (string, error) {
	if cert == nil {
		return "", errors.New("principal: no certificate")
	}
	if r == nil {
		// Named in the form rules match (RFC 2253, as Java), as every
		// error here, so that the log shows one form an operator can copy
		// into --tls-principal-rules.
		dnOf := func() string {
			dn, err := subjectDN(cert.RawSubject)
			if err != nil {
				dn = cert.Subject.String()
			}
			return dn
		}
		if cert.Subject.CommonName == "" {
			return "", fmt.Errorf("principal: certificate subject DN %q has no CN", dnOf())
		}
		if n := countCNs(cert.Subject.Names); n > 1 {
			// Which CN names the client is anyone's guess: Go keeps the
			// last, and within one RDN the order is DER's, not the
			// issuer's. A CA that checked one and copied the other would
			// hand out another user's principal.
			return "", fmt.Errorf("principal: certificate subject DN %q has %d CNs, so its CN names no one client; "+
				"map such certificates with --tls-principal-rules, which see the whole DN", dnOf(), n)
		}
		return "User:" + cert.Subject.CommonName, nil
	}
	dn, err := subjectDN(cert.RawSubject)
	if err != nil {
		return "", err
	}
	name, err := r.Map(dn)
	if err != nil {
		return "", err
	}
	if name == "" {
		return "", fmt.Errorf("principal: rules %s map DN %q to an empty name", r, dn)
	}
	return "User:" + name, nil
}

// oidCommonName is the CN attribute type, 2.5.4.3.
var oidCommonName = asn1.ObjectIdentifier{2, 5, 4, 3}

// countCNs counts the CN attributes among a subject's attributes (every
// RDN's, as crypto/x509 parsed them).
func countCNs(names []pkix.AttributeTypeAndValue) int {
	n := 0
	for _, a := range names {
		if a.Type.Equal(oidCommonName) {
			n++
		}
	}
	return n
}
