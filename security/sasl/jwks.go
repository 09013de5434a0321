package sasl

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// maxJWKSFile bounds the JWKS file; real ones hold a handful of keys.
const maxJWKSFile = 1 << 20

// minRSABits is the smallest RSA key a JWKS may hold usefully; smaller
// keys are skipped (RFC 7518 section 3.3 requires 2048 bits).
const minRSABits = 2048

// jwksCheckInterval is how often Start looks at the JWKS file at most.
const jwksCheckInterval = time.Second

// verifyKey is one usable key of a JWKS.
type verifyKey struct {
	kid string
	alg string // the JWK's "alg", or "" when it does not restrict one
	key crypto.PublicKey
}

// parseJWKS reads RFC 7517's JWK set and keeps the RSA (2048 bits or more)
// and EC public keys meant for signatures ("use" absent or "sig"); private
// keys count as their public halves. Keys of other types, or that do not
// parse, are skipped, as jose4j (Kafka's JWKS reader) skips unknown key
// types; a set with no usable key is an error.
func parseJWKS(data []byte) ([]verifyKey, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, errors.New("not a JSON JWK set")
	}
	var keys []verifyKey
	for _, raw := range set.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil || (k.Use != "" && k.Use != "sig") {
			continue
		}
		var pub crypto.PublicKey
		switch key := k.Key.(type) {
		case *rsa.PublicKey:
			pub = key
		case *rsa.PrivateKey:
			pub = &key.PublicKey
		case *ecdsa.PublicKey:
			pub = key
		case *ecdsa.PrivateKey:
			pub = &key.PublicKey
		default:
			continue
		}
		if r, ok := pub.(*rsa.PublicKey); ok && r.N.BitLen() < minRSABits {
			continue
		}
		keys = append(keys, verifyKey{kid: k.KeyID, alg: k.Algorithm, key: pub})
	}
	if len(keys) == 0 {
		return nil, errors.New("no usable RSA or EC signature key in the JWK set")
	}
	return keys, nil
}

// jwksFile holds the keys of a JWKS file and reloads them when the file
// changes (another size or modification time). A file that fails to load
// leaves the previous keys in use; its error is kept until the file
// changes again.
type jwksFile struct {
	path string
	now  func() time.Time

	keys atomic.Pointer[[]verifyKey]

	mu      sync.Mutex
	checked time.Time // when the file was last looked at
	size    int64     // the size and mtime of the file last read,
	mtime   time.Time // good or bad
	err     error     // why the file last read did not load, or nil
}

// loadJWKS reads the file once; a bad file is an error here.
func loadJWKS(path string, now func() time.Time) (*jwksFile, error) {
	f := &jwksFile{path: path, now: now}
	if err := f.reload(); err != nil {
		return nil, err
	}
	return f, nil
}

// fileErr is why the file as last looked at did not load, or nil.
func (f *jwksFile) fileErr() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// current returns the keys in use.
func (f *jwksFile) current() []verifyKey { return *f.keys.Load() }

// maybeReload reloads if the file was last looked at a second or more ago.
func (f *jwksFile) maybeReload() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.now().Sub(f.checked) < jwksCheckInterval {
		return
	}
	f.reloadLocked(false)
}

// reload reads the file now, whatever its size and time say (an operator's
// SIGHUP: a file replaced with one of the same size and an older or kept
// time is read too), and returns the error of the file on disk: nil when
// the keys in use are its keys.
func (f *jwksFile) reload() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reloadLocked(true)
}

// reloadLocked looks at the file and rereads it if its size or time
// changed, or always when force is set.
func (f *jwksFile) reloadLocked(force bool) error {
	f.checked = f.now()
	st, err := os.Stat(f.path)
	if err != nil {
		// Gone or unreadable: keep the keys, and read the file again
		// whatever its size and time once it is back.
		f.err = fmt.Errorf("sasl: JWKS file: %w", err)
		f.size, f.mtime = -1, time.Time{}
		return f.err
	}
	if !force && f.keys.Load() != nil && st.Size() == f.size && st.ModTime().Equal(f.mtime) {
		return f.err
	}
	f.size, f.mtime = st.Size(), st.ModTime()
	keys, err := readJWKS(f.path)
	if err != nil {
		f.err = fmt.Errorf("sasl: JWKS file %s: %w", f.path, err)
		if f.keys.Load() == nil {
			// Nothing loaded yet: next time, read again whatever the stat.
			f.size, f.mtime = -1, time.Time{}
		}
		return f.err
	}
	f.keys.Store(&keys)
	f.err = nil
	return nil
}

func readJWKS(path string) ([]verifyKey, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	data, err := io.ReadAll(io.LimitReader(file, maxJWKSFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxJWKSFile {
		return nil, fmt.Errorf("larger than %d bytes", maxJWKSFile)
	}
	return parseJWKS(data)
}
