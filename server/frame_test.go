package server

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDecodeFrameHeader checks the request header as decodeFrame reads it
// against frames kmsg writes (client id null, empty and set), the reuse of
// the previous request's client id string, and truncated headers.
func TestDecodeFrameHeader(t *testing.T) {
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.SetVersion(4)
	hb.Group, hb.MemberID, hb.Generation = "g", "m", 7
	frame := func(clientID *string) []byte {
		var f *kmsg.RequestFormatter
		if clientID == nil {
			f = kmsg.NewRequestFormatter(kmsg.FormatterClientID(""))
			b := f.AppendRequest(nil, hb, 9)
			// A null client id: length -1 and no bytes.
			b = append(b[:4+8], append([]byte{0xff, 0xff}, b[4+10:]...)...)
			return b[4:]
		}
		f = kmsg.NewRequestFormatter(kmsg.FormatterClientID(*clientID))
		return f.AppendRequest(nil, hb, 9)[4:]
	}
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name     string
		clientID *string
		want     string
	}{{"null", nil, ""}, {"empty", str(""), ""}, {"set", str("client-1"), "client-1"}} {
		r, err := decodeFrame(frame(tc.clientID), "")
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got, ok := r.req.(*kmsg.HeartbeatRequest)
		if !ok || r.key != hb.Key() || r.version != 4 || r.corr != 9 || r.clientID != tc.want ||
			got.Group != "g" || got.MemberID != "m" || got.Generation != 7 {
			t.Fatalf("%s: decoded key %d v%d corr %d client %q req %+v", tc.name, r.key, r.version, r.corr, r.clientID, r.req)
		}
	}

	prev := string([]byte("client-1")) // a string of its own
	r, err := decodeFrame(frame(str("client-1")), prev)
	if err != nil {
		t.Fatal(err)
	}
	if unsafe.StringData(r.clientID) != unsafe.StringData(prev) {
		t.Error("an unchanged client id was allocated again")
	}
	if r, err = decodeFrame(frame(str("client-2")), prev); err != nil || r.clientID != "client-2" {
		t.Errorf("a changed client id: %q, %v", r.clientID, err)
	}

	full := frame(str("client-1"))
	for n := range 10 + len("client-1") {
		if _, err := decodeFrame(full[:n], ""); !errors.Is(err, errTruncatedHeader) {
			t.Errorf("header cut at %d bytes: %v, want a truncated header", n, err)
		}
	}
}
