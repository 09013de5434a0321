package sasl

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"strings"

	"github.com/xdg-go/scram"
	"github.com/xdg-go/stringprep"
)

// Iteration bounds of a SCRAM credential, the same for both mechanisms, as
// in Kafka's ScramMechanism: the broker refuses credentials outside them,
// and the bound also caps the PBKDF2 work one PLAIN login can cost.
const (
	MinIterations = 4096
	MaxIterations = 16384
)

// DefaultIterations and saltLen are the shape of the credentials cohort
// makes: those cohort user set sends (franz-go's kadm draws 24-byte salts)
// and those the node derives itself (the bootstrap user). One shape for
// both, and for the made-up credentials of unknown users when no stored
// shape is more common, so that no user stands out by its parameters (the
// bootstrap user is a super user, the one worth finding).
const (
	DefaultIterations = 8192
	saltLen           = 24
)

// maxSaltLen bounds the salt a credential may carry (from
// AlterUserScramCredentials or the store); Kafka's clients send a few dozen
// bytes, and the bound keeps a stored credential small.
const maxSaltLen = 1024

// credentialVersion is the first byte of MarshalBinary's encoding.
const credentialVersion = 1

// scramHash describes the hash of one SCRAM mechanism.
type scramHash struct {
	gen  scram.HashGeneratorFcn // also a func() hash.Hash
	size int                    // output size: the length of every key
	code byte                   // Kafka's ScramMechanism type, used in the encoding
}

func (h scramHash) new() hash.Hash { return h.gen() }

var (
	hashSHA256 = scramHash{gen: scram.SHA256, size: sha256.Size, code: 1}
	hashSHA512 = scramHash{gen: scram.SHA512, size: sha512.Size, code: 2}
)

// hashFor returns the hash of a SCRAM mechanism name.
func hashFor(mechanism string) (scramHash, error) {
	switch mechanism {
	case ScramSHA256:
		return hashSHA256, nil
	case ScramSHA512:
		return hashSHA512, nil
	}
	return scramHash{}, fmt.Errorf("sasl: %q is not a SCRAM mechanism", mechanism)
}

// hashForCode is hashFor for the encoding's mechanism byte.
func hashForCode(code byte) (string, scramHash, bool) {
	switch code {
	case hashSHA256.code:
		return ScramSHA256, hashSHA256, true
	case hashSHA512.code:
		return ScramSHA512, hashSHA512, true
	}
	return "", scramHash{}, false
}

// NewCredential makes a SCRAM credential for mechanism (ScramSHA256 or
// ScramSHA512) from a password: a random 32-byte salt, and StoredKey and
// ServerKey derived as RFC 5802 says, from the password's UTF-8 bytes as
// they are. That is what Kafka's clients, librdkafka and franz-go (cohort's
// own CLI) derive when they log in and what the admin clients store with
// AlterUserScramCredentials (Kafka's brokers never normalize); clients that
// SASLprep first (RFC 4013: xdg-go/scram, so sarama and kafka-go) derive the
// same for every ASCII password and most others, but not for a password
// SASLprep changes (a no-break space, a decomposed accent). A password with
// a NUL character is refused: PLAIN could never carry it. Neither the
// password nor the salted password is kept.
func NewCredential(mechanism, password string, iterations int) (Credential, error) {
	h, err := hashFor(mechanism)
	if err != nil {
		return Credential{}, err
	}
	if err := checkIterations(iterations); err != nil {
		return Credential{}, err
	}
	if strings.ContainsRune(password, 0) {
		// PLAIN separates its fields with NUL (RFC 4616): such a
		// password could never be given there.
		return Credential{}, errors.New("sasl: the password contains a NUL character")
	}
	salt := make([]byte, saltLen)
	if _, err := rand.Read(salt); err != nil {
		return Credential{}, fmt.Errorf("sasl: drawing a salt: %w", err)
	}
	salted, err := saltPassword(h, password, salt, iterations)
	if err != nil {
		return Credential{}, err
	}
	defer clear(salted)
	return credentialFrom(mechanism, h, salt, salted, iterations), nil
}

// CredentialFromSalted makes a credential from a salt and a salted password
// computed elsewhere, which is what a client's AlterUserScramCredentials
// request carries (Kafka's admin client salts the password itself so the
// password never reaches the broker). The salted password must be as long
// as the mechanism's hash and is not kept.
func CredentialFromSalted(mechanism string, salt, saltedPassword []byte, iterations int) (Credential, error) {
	h, err := hashFor(mechanism)
	if err != nil {
		return Credential{}, err
	}
	if err := checkIterations(iterations); err != nil {
		return Credential{}, err
	}
	if err := checkSalt(salt); err != nil {
		return Credential{}, err
	}
	if len(saltedPassword) != h.size {
		return Credential{}, fmt.Errorf("sasl: salted password for %s has %d bytes, want %d",
			mechanism, len(saltedPassword), h.size)
	}
	return credentialFrom(mechanism, h, append([]byte(nil), salt...), saltedPassword, iterations), nil
}

// credentialFrom derives the stored keys from a salted password.
func credentialFrom(mechanism string, h scramHash, salt, salted []byte, iterations int) Credential {
	stored, server := deriveKeys(h, salted)
	return Credential{Mechanism: mechanism, Salt: salt, Iterations: iterations, StoredKey: stored, ServerKey: server}
}

// saltPassword is RFC 5802's Hi(password, salt, i) over the password's
// bytes as they are, as Kafka's clients compute it (see NewCredential).
func saltPassword(h scramHash, password string, salt []byte, iterations int) ([]byte, error) {
	return pbkdf2.Key(h.new, password, salt, iterations, h.size)
}

// preparedPassword is password after SASLprep (RFC 4013), and whether that
// differs from it: the other form a stored credential may have been made
// from (by a client that prepares passwords, or by cohort before it stopped
// doing so). false when SASLprep refuses the password.
func preparedPassword(password string) (string, bool) {
	p, err := stringprep.SASLprep.Prepare(password)
	if err != nil || p == password {
		return "", false
	}
	return p, true
}

// deriveKeys returns StoredKey = H(HMAC(salted, "Client Key")) and
// ServerKey = HMAC(salted, "Server Key").
func deriveKeys(h scramHash, salted []byte) (storedKey, serverKey []byte) {
	clientKey := hmacOf(h, salted, "Client Key")
	defer clear(clientKey)
	d := h.new()
	d.Write(clientKey)
	return d.Sum(nil), hmacOf(h, salted, "Server Key")
}

func hmacOf(h scramHash, key []byte, msg string) []byte {
	m := hmac.New(h.new, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

func checkIterations(i int) error {
	if i < MinIterations || i > MaxIterations {
		return fmt.Errorf("sasl: %d iterations is outside [%d, %d]", i, MinIterations, MaxIterations)
	}
	return nil
}

func checkSalt(salt []byte) error {
	if len(salt) == 0 || len(salt) > maxSaltLen {
		return fmt.Errorf("sasl: salt of %d bytes, want 1 to %d", len(salt), maxSaltLen)
	}
	return nil
}

// validate reports whether c is a usable credential: a known mechanism,
// iterations within bounds, a salt, and keys as long as the hash.
func (c Credential) validate() (scramHash, error) {
	h, err := hashFor(c.Mechanism)
	if err != nil {
		return h, err
	}
	if err := checkIterations(c.Iterations); err != nil {
		return h, err
	}
	if err := checkSalt(c.Salt); err != nil {
		return h, err
	}
	if len(c.StoredKey) != h.size || len(c.ServerKey) != h.size {
		return h, fmt.Errorf("sasl: %s keys must have %d bytes", c.Mechanism, h.size)
	}
	return h, nil
}

// MarshalBinary encodes the credential for the credential store: a version
// byte (1), the mechanism (1 for SCRAM-SHA-256, 2 for SCRAM-SHA-512, as
// Kafka numbers them), the iteration count and the salt length as unsigned
// varints, the salt, then StoredKey and ServerKey (their length is the
// mechanism's hash size). An invalid credential is an error.
func (c Credential) MarshalBinary() ([]byte, error) {
	h, err := c.validate()
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, 2+2*binary.MaxVarintLen32+len(c.Salt)+2*h.size)
	b = append(b, credentialVersion, h.code)
	b = binary.AppendUvarint(b, uint64(c.Iterations))
	b = binary.AppendUvarint(b, uint64(len(c.Salt)))
	b = append(b, c.Salt...)
	b = append(b, c.StoredKey...)
	b = append(b, c.ServerKey...)
	return b, nil
}

// errBadEncoding is the error of UnmarshalBinary for any malformed input.
var errBadEncoding = errors.New("sasl: malformed credential encoding")

// uvarintLen is the length of v's shortest varint, the only one
// MarshalBinary writes: a longer one (0x9e 0xb5 0x00 for 0x9e 0x35) would
// decode to the same credential from other bytes.
func uvarintLen(v uint64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], v)
}

// UnmarshalBinary decodes MarshalBinary's encoding. It rejects an unknown
// version or mechanism, trailing bytes and anything that would not pass
// MarshalBinary's checks; c is left unchanged on error.
func (c *Credential) UnmarshalBinary(b []byte) error {
	if len(b) < 2 || b[0] != credentialVersion {
		return errBadEncoding
	}
	mech, h, ok := hashForCode(b[1])
	if !ok {
		return errBadEncoding
	}
	b = b[2:]
	iters, n := binary.Uvarint(b)
	if n <= 0 || iters > MaxIterations || n != uvarintLen(iters) {
		return errBadEncoding
	}
	b = b[n:]
	sl, n := binary.Uvarint(b)
	if n <= 0 || sl > maxSaltLen || n != uvarintLen(sl) || uint64(len(b)-n) != sl+2*uint64(h.size) {
		return errBadEncoding
	}
	b = b[n:]
	d := Credential{
		Mechanism:  mech,
		Iterations: int(iters),
		Salt:       append([]byte(nil), b[:sl]...),
		StoredKey:  append([]byte(nil), b[sl:int(sl)+h.size]...),
		ServerKey:  append([]byte(nil), b[int(sl)+h.size:]...),
	}
	if _, err := d.validate(); err != nil {
		return fmt.Errorf("%w: %v", errBadEncoding, err)
	}
	*c = d
	return nil
}
