package acl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// encodingV1 is the first byte of a binding's binary encoding.
//
// Version 1 layout: the version byte; the resource type, pattern type,
// operation and permission codes, one byte each; then the resource name,
// the principal and the host, each as a uvarint byte length and the bytes.
// Decoding is strict (minimal uvarints, no bytes left over), so every
// binding has exactly one encoding.
const encodingV1 = 1

// MarshalBinary encodes b for storage (see encodingV1). It never fails;
// it does not validate b.
func (b Binding) MarshalBinary() ([]byte, error) {
	n := 5 + 3*binary.MaxVarintLen64 + len(b.ResourceName) + len(b.Principal) + len(b.Host)
	buf := make([]byte, 0, n)
	buf = append(buf, encodingV1, byte(b.ResourceType), byte(b.PatternType), byte(b.Operation), byte(b.Permission))
	for _, s := range [...]string{b.ResourceName, b.Principal, b.Host} {
		buf = binary.AppendUvarint(buf, uint64(len(s)))
		buf = append(buf, s...)
	}
	return buf, nil
}

// errCorrupt is wrapped by UnmarshalBinary's errors.
var errCorrupt = errors.New("acl: corrupt binding encoding")

// UnmarshalBinary decodes what MarshalBinary encoded. Anything else is an
// error (never a panic); b is left unchanged then.
func (b *Binding) UnmarshalBinary(data []byte) error {
	if len(data) == 0 {
		return fmt.Errorf("%w: empty", errCorrupt)
	}
	if data[0] != encodingV1 {
		return fmt.Errorf("%w: unknown version %d", errCorrupt, data[0])
	}
	if len(data) < 5 {
		return fmt.Errorf("%w: %d bytes, too short", errCorrupt, len(data))
	}
	d := Binding{
		ResourceType: ResourceType(data[1]),
		PatternType:  PatternType(data[2]),
		Operation:    Operation(data[3]),
		Permission:   Permission(data[4]),
	}
	rest := data[5:]
	for _, field := range [...]*string{&d.ResourceName, &d.Principal, &d.Host} {
		n, size := binary.Uvarint(rest)
		if size <= 0 || size != uvarintLen(n) {
			return fmt.Errorf("%w: bad length", errCorrupt)
		}
		rest = rest[size:]
		if n > uint64(len(rest)) {
			return fmt.Errorf("%w: length %d past the end", errCorrupt, n)
		}
		*field = string(rest[:n])
		rest = rest[n:]
	}
	if len(rest) > 0 {
		return fmt.Errorf("%w: %d trailing bytes", errCorrupt, len(rest))
	}
	*b = d
	return nil
}

// uvarintLen is the length of n's minimal uvarint encoding.
func uvarintLen(n uint64) int {
	var buf [binary.MaxVarintLen64]byte
	return binary.PutUvarint(buf[:], n)
}

// Key is a stable key that identifies b, for a store: readable, ordered
// by resource type first, and different for different bindings (every
// string is prefixed by its byte length), e.g.
// "TOPIC/LITERAL/6:orders/10:User:alice/1:*/READ/ALLOW". Codes print as
// Kafka's names (UNKNOWN(n) for codes Kafka does not define), which do not
// change.
func (b Binding) Key() string {
	var k strings.Builder
	k.Grow(48 + len(b.ResourceName) + len(b.Principal) + len(b.Host))
	k.WriteString(b.ResourceType.String())
	k.WriteByte('/')
	k.WriteString(b.PatternType.String())
	for _, s := range [...]string{b.ResourceName, b.Principal, b.Host} {
		k.WriteByte('/')
		k.WriteString(strconv.Itoa(len(s)))
		k.WriteByte(':')
		k.WriteString(s)
	}
	k.WriteByte('/')
	k.WriteString(b.Operation.String())
	k.WriteByte('/')
	k.WriteString(b.Permission.String())
	return k.String()
}
