package principal

import (
	"encoding/asn1"
	"testing"
	"unicode/utf16"
)

func bmpString(s string) asn1.RawValue {
	var b []byte
	for _, u := range utf16.Encode([]rune(s)) {
		b = append(b, byte(u>>8), byte(u))
	}
	return asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagBMPString, Bytes: b}
}

// TestDNOfOtherStringTypes: a CA may encode a subject's text as a
// BMPString (UTF-16) or a T61String (read as ISO-8859-1 by Java), and Java
// prints both decoded, so Kafka's rules, ACLs and super users see
// CN=mallory whichever type holds it. Printed as raw bytes, the DN of a
// BMPString CN was CN=\00m\00a…: its holder got a principal that no DENY
// written for CN=mallory names, while an ALLOW for User:* still let it in.
func TestDNOfOtherStringTypes(t *testing.T) {
	plain := certificate(t, rdn(atv(oidO, "Org")), rdn(atv(oidCN, "mallory")))
	bmp := certificate(t, rdn(atv(oidO, "Org")), rdn(atv(oidCN, bmpString("mallory"))))
	want, err := FromCertificate(plain, mustRules(t, "DEFAULT"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := FromCertificate(bmp, mustRules(t, "DEFAULT")); err != nil || got != want {
		t.Errorf("BMPString CN: principal %q, %v; want %q, as for the same CN as a PrintableString", got, err, want)
	}
	t61 := certificate(t, rdn(atv(oidCN, asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagT61String, Bytes: []byte("Zo\xeb")})))
	if got, err := FromCertificate(t61, nil); err != nil || got != "User:Zoë" {
		t.Errorf("T61String CN without rules: %q, %v; want User:Zoë, as the DN rules see it (crypto/x509 reads T61 as ISO-8859-1 too)", got, err)
	}
	for _, tc := range []struct {
		name string
		v    asn1.RawValue
		want string
	}{
		{"BMPString beyond ASCII", bmpString("Zoë, 😀"), `CN=Zoë\, 😀`},
		{"BMPString of odd length", asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagBMPString, Bytes: []byte{0, 'a', 0}}, "CN=a\uFFFD"},
		{"T61String as ISO-8859-1", asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagT61String, Bytes: []byte("Zo\xeb")}, "CN=Zoë"},
	} {
		if got, err := subjectDN(rawSubject(t, rdn(atv(oidCN, tc.v)))); err != nil || got != tc.want {
			t.Errorf("%s: DN %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}
