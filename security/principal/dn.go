package principal

import (
	"encoding/asn1"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// attribute is one AttributeTypeAndValue of a certificate name, its value
// kept as encoded.
type attribute struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

// relativeNameSET is an RDN (encoding/asn1 reads a slice type whose name
// ends in SET as a SET OF).
type relativeNameSET []attribute

// rfc2253Keywords are the attribute names Java's X500Principal.getName()
// (RFC 2253) prints; it prints other attributes as their OID.
var rfc2253Keywords = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.9":                    "STREET",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1":  "UID",
}

// javaStringTags are the universal tags whose values Java prints as text
// (AVA.isDerString): UTF8String, PrintableString, T61String, IA5String,
// GeneralString, BMPString. Java decodes all of them as UTF-8, so this
// does too (a BMPString is thus garbled the same way).
var javaStringTags = map[int]bool{12: true, 19: true, 20: true, 22: true, 27: true, 30: true}

// subjectDN prints a certificate's DER-encoded subject as Java's
// X500Principal.getName() does (RFC 2253 with Java's choices): RDNs in
// reverse order separated by ',', the attributes of an RDN in their
// encoded order separated by '+', KEYWORD=value or OID=#hex.
func subjectDN(raw []byte) (string, error) {
	var rdns []relativeNameSET
	rest, err := asn1.Unmarshal(raw, &rdns)
	if err != nil {
		return "", fmt.Errorf("principal: reading the certificate subject: %w", err)
	}
	if len(rest) > 0 {
		return "", fmt.Errorf("principal: %d bytes after the certificate subject", len(rest))
	}
	var b strings.Builder
	for i := len(rdns) - 1; i >= 0; i-- {
		if i < len(rdns)-1 {
			b.WriteByte(',')
		}
		for j, a := range rdns[i] {
			if j > 0 {
				b.WriteByte('+')
			}
			writeAttribute(&b, a)
		}
	}
	return b.String(), nil
}

func writeAttribute(b *strings.Builder, a attribute) {
	keyword, named := rfc2253Keywords[a.Type.String()]
	v := a.Value
	if !named || v.Class != asn1.ClassUniversal || v.IsCompound || !javaStringTags[v.Tag] {
		if named {
			b.WriteString(keyword)
		} else {
			b.WriteString(a.Type.String())
		}
		b.WriteString("=#")
		b.WriteString(hex.EncodeToString(v.FullBytes))
		return
	}
	b.WriteString(keyword)
	b.WriteByte('=')
	writeValue(b, decodeText(v.Tag, v.Bytes))
}

// decodeText is the text of a string value as Java reads it: a BMPString
// is UTF-16 big-endian (an odd last byte, or a lone surrogate, is U+FFFD),
// a T61String ISO-8859-1 (each byte the code point of its value), the
// other types their bytes. A CA may encode a name in any of them, and the
// DN rules, ACLs and super users see must be the same text whichever it
// chose: printed as raw bytes, a BMPString CN=mallory read CN=\00m\00a…, a
// principal no DENY written for mallory names.
func decodeText(tag int, raw []byte) string {
	switch tag {
	case asn1.TagBMPString:
		units := make([]uint16, 0, len(raw)/2)
		for i := 0; i+1 < len(raw); i += 2 {
			units = append(units, uint16(raw[i])<<8|uint16(raw[i+1]))
		}
		s := string(utf16.Decode(units))
		if len(raw)%2 == 1 {
			s += string(utf8.RuneError)
		}
		return s
	case asn1.TagT61String:
		rs := make([]rune, len(raw))
		for i, c := range raw {
			rs[i] = rune(c)
		}
		return string(rs)
	}
	return string(raw)
}

// writeValue escapes a text value as Java does: a backslash before each of
// , = + < > # ; " \ and before leading and trailing spaces and CRs, "\00"
// for NUL; other characters as they are (invalid UTF-8 as U+FFFD).
func writeValue(b *strings.Builder, s string) {
	body := make([]byte, 0, len(s)+8)
	for _, r := range s {
		switch {
		case strings.ContainsRune(`,=+<>#;"\`, r):
			body = append(body, '\\', byte(r))
		case r == 0:
			body = append(body, `\00`...)
		default:
			body = utf8.AppendRune(body, r)
		}
	}
	blank := func(c byte) bool { return c == ' ' || c == '\r' }
	lead := 0
	for lead < len(body) && blank(body[lead]) {
		lead++
	}
	trail := len(body) - 1
	for trail >= 0 && blank(body[trail]) {
		trail--
	}
	for i, c := range body {
		if i < lead || i > trail {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
}
