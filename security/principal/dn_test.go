package principal

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	oidCN     = asn1.ObjectIdentifier{2, 5, 4, 3}
	oidSerial = asn1.ObjectIdentifier{2, 5, 4, 5}
	oidC      = asn1.ObjectIdentifier{2, 5, 4, 6}
	oidL      = asn1.ObjectIdentifier{2, 5, 4, 7}
	oidST     = asn1.ObjectIdentifier{2, 5, 4, 8}
	oidO      = asn1.ObjectIdentifier{2, 5, 4, 10}
	oidOU     = asn1.ObjectIdentifier{2, 5, 4, 11}
	oidDC     = asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}
	oidUID    = asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 1}
	oidEmail  = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 1}
)

// atv is one attribute; a string value marshals as PrintableString when
// it can, else UTF8String; an asn1.RawValue as it is.
func atv(oid asn1.ObjectIdentifier, v any) pkix.AttributeTypeAndValue {
	return pkix.AttributeTypeAndValue{Type: oid, Value: v}
}

func ia5(s string) asn1.RawValue {
	return asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagIA5String, Bytes: []byte(s)}
}

var (
	keyOnce sync.Once
	key     *ecdsa.PrivateKey
)

// certificate makes a self-signed certificate whose subject is rdns,
// encoded in that order (least specific first, as in certificates).
func certificate(t *testing.T, rdns ...[]pkix.AttributeTypeAndValue) *x509.Certificate {
	t.Helper()
	keyOnce.Do(func() {
		var err error
		if key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			panic(err)
		}
	})
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		RawSubject:   rawSubject(t, rdns...),
		NotBefore:    time.Unix(0, 0),
		NotAfter:     time.Unix(0, 0).Add(24 * time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// rawSubject encodes rdns as a certificate subject, in that order.
func rawSubject(t *testing.T, rdns ...[]pkix.AttributeTypeAndValue) []byte {
	t.Helper()
	var seq pkix.RDNSequence
	for _, rdn := range rdns {
		seq = append(seq, rdn)
	}
	raw, err := asn1.Marshal(seq)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func rdn(as ...pkix.AttributeTypeAndValue) []pkix.AttributeTypeAndValue { return as }

// TestSubjectDN checks the DN against what Java's X500Principal.getName()
// prints for the same subjects.
func TestSubjectDN(t *testing.T) {
	tests := []struct {
		name string
		rdns [][]pkix.AttributeTypeAndValue
		want string
	}{
		{"common", [][]pkix.AttributeTypeAndValue{
			rdn(atv(oidC, "US")), rdn(atv(oidO, "acme")), rdn(atv(oidOU, "eng")), rdn(atv(oidCN, "alice")),
		}, "CN=alice,OU=eng,O=acme,C=US"},
		{"L and ST", [][]pkix.AttributeTypeAndValue{
			rdn(atv(oidC, "US")), rdn(atv(oidST, "MD")), rdn(atv(oidL, "Fulton")), rdn(atv(oidCN, "Duke")),
		}, "CN=Duke,L=Fulton,ST=MD,C=US"},
		{"order kept", [][]pkix.AttributeTypeAndValue{
			rdn(atv(oidCN, "alice")), rdn(atv(oidO, "acme")),
		}, "O=acme,CN=alice"},
		{"repeated OU", [][]pkix.AttributeTypeAndValue{
			rdn(atv(oidO, "acme")), rdn(atv(oidOU, "eng")), rdn(atv(oidOU, "platform")), rdn(atv(oidCN, "alice")),
		}, "CN=alice,OU=platform,OU=eng,O=acme"},
		{"DC and UID are named", [][]pkix.AttributeTypeAndValue{
			rdn(atv(oidDC, ia5("com"))), rdn(atv(oidDC, ia5("example"))), rdn(atv(oidUID, "a1")),
		}, "UID=a1,DC=example,DC=com"},
		{"multi-valued RDN", [][]pkix.AttributeTypeAndValue{
			rdn(atv(oidO, "acme")), rdn(atv(oidCN, "alice"), atv(oidUID, "a1")),
		}, "CN=alice+UID=a1,O=acme"},
		{"unnamed attributes are OID=#DER", [][]pkix.AttributeTypeAndValue{
			rdn(atv(oidEmail, ia5("a@b.c"))), rdn(atv(oidSerial, "1234")), rdn(atv(oidCN, "alice")),
		}, "CN=alice,2.5.4.5=#130431323334,1.2.840.113549.1.9.1=#16056140622e63"},
		{"escapes", [][]pkix.AttributeTypeAndValue{
			rdn(atv(oidO, `a,b+c=d<e>f#g;h"i\j`)), rdn(atv(oidCN, "Tkac, Adam")),
		}, `CN=Tkac\, Adam,O=a\,b\+c\=d\<e\>f\#g\;h\"i\\j`},
		{"leading and trailing blanks", [][]pkix.AttributeTypeAndValue{
			rdn(atv(oidOU, "  x y ")), rdn(atv(oidCN, "#1")),
		}, `CN=\#1,OU=\ \ x y\ `},
		{"UTF-8 and NUL", [][]pkix.AttributeTypeAndValue{
			rdn(atv(oidCN, "Zoë\x00!")),
		}, `CN=Zoë\00!`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cert := certificate(t, tt.rdns...)
			if got, err := subjectDN(cert.RawSubject); err != nil || got != tt.want {
				t.Errorf("subjectDN = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	// Go's x509 refuses a certificate with a subject value that is not
	// text; Java prints it as hex.
	if got, err := subjectDN(rawSubject(t, rdn(atv(oidCN, 7)))); err != nil || got != "CN=#020107" {
		t.Errorf("subjectDN of an INTEGER CN = %q, %v; want CN=#020107", got, err)
	}
}

// TestPkixNameDiffers records why FromCertificate does not use
// pkix.Name.String: it merges repeated attributes into one RDN.
func TestPkixNameDiffers(t *testing.T) {
	cert := certificate(t, rdn(atv(oidO, "acme")), rdn(atv(oidOU, "eng")), rdn(atv(oidOU, "platform")), rdn(atv(oidCN, "alice")))
	if got := cert.Subject.String(); got != "CN=alice,OU=eng+OU=platform,O=acme" {
		t.Logf("pkix.Name.String now gives %q", got)
	}
	if dn, _ := subjectDN(cert.RawSubject); dn == cert.Subject.String() {
		t.Errorf("subjectDN agrees with pkix.Name.String (%q) on repeated OUs", dn)
	}
}

func TestSubjectDNRejectsGarbage(t *testing.T) {
	for _, raw := range [][]byte{nil, {0x30}, {0x30, 0x00, 0x00}, {0x04, 0x01, 0x00}} {
		if dn, err := subjectDN(raw); err == nil {
			t.Errorf("subjectDN(%x) = %q, want an error", raw, dn)
		}
	}
}

func TestFromCertificate(t *testing.T) {
	duke := certificate(t, rdn(atv(oidC, "US")), rdn(atv(oidO, "Org")), rdn(atv(oidOU, "ServiceUsers")), rdn(atv(oidCN, "Duke")))
	other := certificate(t, rdn(atv(oidC, "US")), rdn(atv(oidO, "Org")), rdn(atv(oidCN, "Eve")))
	noCN := certificate(t, rdn(atv(oidO, "Org")))

	tests := []struct {
		name  string
		cert  *x509.Certificate
		rules string // "-" for nil rules
		want  string // "" for an error
	}{
		{"CN without rules", duke, "-", "User:Duke"},
		{"no CN without rules", noCN, "-", ""},
		{"Kafka's example rule", duke, "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", "User:Duke"},
		{"Kafka's example falls to DEFAULT", other, "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", "User:CN=Eve,O=Org,C=US"},
		{"lower-case", duke, "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L", "User:duke"},
		{"upper-case", duke, "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/U", "User:DUKE"},
		{"no rule applies", other, "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/", ""},
		{"no CN, with rules", noCN, "DEFAULT", "User:O=Org"},
		{"empty name", duke, "RULE:^CN=Duke.*$//", ""},
		{"nil certificate", nil, "-", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r *Rules
			if tt.rules != "-" {
				r = mustRules(t, tt.rules)
			}
			got, err := FromCertificate(tt.cert, r)
			switch {
			case tt.want == "" && err == nil:
				t.Errorf("FromCertificate = %q, want an error", got)
			case tt.want != "" && (err != nil || got != tt.want):
				t.Errorf("FromCertificate = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestFromCertificateErrorsNameTheDN: every refusal names the subject in
// the one form the rules match (RFC 2253 as Java writes it), so that an
// operator can copy it from the log into --tls-principal-rules; Go's
// pkix.Name form escapes differently.
func TestFromCertificateErrorsNameTheDN(t *testing.T) {
	odd := certificate(t, rdn(atv(oidO, "ac,me")), rdn(atv(oidOU, "x=y; <z>#")))
	const javaDN = `OU=x\=y\; \<z\>\#,O=ac\,me`
	for _, rules := range []string{"-", "RULE:^CN=(.*)$/$1/"} {
		var r *Rules
		if rules != "-" {
			r = mustRules(t, rules)
		}
		_, err := FromCertificate(odd, r)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("DN %q", javaDN)) {
			t.Errorf("rules %s: error %v, want it to name DN %q", rules, err, javaDN)
		}
	}
}
