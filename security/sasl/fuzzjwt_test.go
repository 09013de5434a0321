package sasl

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// FuzzOAuthClaims signs fuzz-chosen claims with a key of the JWKS, so that
// the claim checks (which FuzzOAuthStep cannot reach: it cannot forge a
// signature) see arbitrary JSON. Nothing may panic, and a token that passes
// must hold what verify promises: each claim name once, "exp" a number no
// further in the past than the skew, "iss" and "aud" as configured, and the
// principal the trimmed, non-empty "sub" string.
func FuzzOAuthClaims(f *testing.F) {
	testKeys(f)
	fx := newOAuthFixture(f, OAuthConfig{Issuer: "https://idp", Audience: "cohort"}, bothKeys()...)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: ecKey}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "ec1"))
	if err != nil {
		f.Fatal(err)
	}
	exp := t0.Add(time.Hour).Unix()
	for _, s := range []string{
		fmt.Sprintf(`{"iss":"https://idp","aud":"cohort","sub":"alice","exp":%d,"iat":%d}`, exp, t0.Unix()),
		fmt.Sprintf(`{"iss":"https://idp","aud":["x","cohort"],"sub":" bob ","exp":%d.5,"nbf":%d}`, exp, t0.Unix()),
		fmt.Sprintf(`{"iss":"https://idp","aud":"cohort","sub":"alice","ſub":"admin","exp":%d}`, exp),
		fmt.Sprintf(`{"iss":"https://idp","aud":"cohort","sub":{"a":1},"exp":%d}`, exp),
		`{"iss":"https://idp","aud":"cohort","sub":"alice","exp":1e308}`,
		`{"iss":"https://idp","aud":"cohort","sub":"alice","exp":-1e308,"iat":1e400}`,
		`[1,2]`, `{"a":`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		obj, err := signer.Sign(payload)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := obj.CompactSerialize()
		if err != nil {
			t.Fatal(err)
		}
		s := fx.m.Start()
		done, err := checkStep(t, s, initial(tok))
		if err != nil || !done {
			return
		}
		// Accepted: read the claims back with a decoder that sees every
		// name as written.
		dec := json.NewDecoder(bytes.NewReader(payload))
		dec.UseNumber()
		var all map[string]json.RawMessage
		if err := dec.Decode(&all); err != nil {
			t.Fatalf("accepted claims that do not decode: %v", err)
		}
		var sub string
		if json.Unmarshal(all["sub"], &sub) != nil || strings.TrimSpace(sub) == "" || s.Principal() != "User:"+strings.TrimSpace(sub) {
			t.Fatalf("principal %q from sub %s", s.Principal(), all["sub"])
		}
		var e float64
		if json.Unmarshal(all["exp"], &e) != nil || math.IsInf(e, 0) || float64(t0.Add(-defaultClockSkew).Unix()) > e {
			t.Fatalf("accepted exp %s at %v", all["exp"], t0)
		}
		var iss string
		if json.Unmarshal(all["iss"], &iss) != nil || iss != "https://idp" {
			t.Fatalf("accepted iss %s", all["iss"])
		}
		if a := string(all["aud"]); !strings.Contains(a, `"cohort"`) {
			t.Fatalf("accepted aud %s", a)
		}
	})
}

// FuzzParseJWKS: a JWK set never panics the parser, and what it keeps is
// usable for signatures: RSA keys of 2048 bits or more and EC keys, with
// their public halves.
func FuzzParseJWKS(f *testing.F) {
	testKeys(f)
	for _, ks := range [][]jose.JSONWebKey{bothKeys(), {{Key: rsaKey, KeyID: "priv", Use: "sig", Algorithm: "RS256"}}, {{Key: ecKey, Use: "enc"}}} {
		b, err := json.Marshal(jose.JSONWebKeySet{Keys: ks})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB"},{"kty":"EC","crv":"P-256","x":"","y":""},{"kty":"oct","k":"AA"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`))
	f.Add([]byte(`{"keys":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		keys, err := parseJWKS(data)
		if err != nil {
			if keys != nil {
				t.Fatalf("keys %v with error %v", keys, err)
			}
			return
		}
		if len(keys) == 0 {
			t.Fatal("no keys and no error")
		}
		for _, k := range keys {
			switch key := k.key.(type) {
			case *rsa.PublicKey:
				if key.N == nil || key.N.BitLen() < minRSABits {
					t.Fatalf("kept a short RSA key (%d bits)", key.N.BitLen())
				}
			case *ecdsa.PublicKey:
				if key.Curve == nil {
					t.Fatal("kept an EC key without a curve")
				}
			default:
				t.Fatalf("kept a %T", key)
			}
		}
	})
}
