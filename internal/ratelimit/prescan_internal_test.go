package ratelimit

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

var testCaps = caps{descriptors: 4, entries: 3, valueLen: 8}

// shaped builds a request of n descriptors of m entries with keys and
// values of l bytes, each descriptor with an override and hits_addend so
// every optional field counts towards the size.
func shaped(n, m, l int) *rlsv3.RateLimitRequest {
	req := &rlsv3.RateLimitRequest{Domain: strings.Repeat("d", l), HitsAddend: 1 << 31}
	for range n {
		d := &ratelimitv3.RateLimitDescriptor{
			Limit:      &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1<<32 - 1, Unit: typev3.RateLimitUnit_YEAR},
			HitsAddend: wrapperspb.UInt64(1<<64 - 1),
		}
		for range m {
			d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: strings.Repeat("k", l), Value: strings.Repeat("v", l)})
		}
		req.Descriptors = append(req.Descriptors, d)
	}
	return req
}

func wire(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestPrescan(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
		want string // "" = accepted
	}{
		{"empty message", nil, ""},
		{"at every cap", wire(t, shaped(4, 3, 8)), ""},
		{"one descriptor too many", wire(t, shaped(5, 1, 1)), "more than the maximum of 4 descriptors"},
		{"one entry too many", wire(t, shaped(1, 4, 1)), "descriptor 0 has more than the maximum of 3 entries"},
		{"long key and value", wire(t, shaped(1, 1, 9)), "domain is 9 bytes long"},
		{"long value", wire(t, &rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k", Value: "123456789"}}}}}), "descriptor 0 entry 0 value is 9 bytes long"},
		{"two million empty descriptors", bytes.Repeat([]byte{0x12, 0x00}, 2<<20), "more than the maximum of 4 descriptors"},
		{"empty entries", bytes.Repeat([]byte{0x12, 0x08, 0x0a, 0x00, 0x0a, 0x00, 0x0a, 0x00, 0x0a, 0x00}, 1), "more than the maximum of 3 entries"},
		{"unknown fields are skipped", append(wire(t, shaped(1, 1, 1)), 0xf8, 0x01, 0x05, 0x7a, 0x02, 'h', 'i'), ""},
		{"truncated length", []byte{0x12, 0x05, 0x0a}, errMalformed.Error()},
		{"truncated varint", []byte{0x18, 0xff}, errMalformed.Error()},
		{"field number zero", []byte{0x00, 0x00}, errMalformed.Error()},
		{"garbage in an entry", []byte{0x12, 0x03, 0x0a, 0x01, 0xff}, errMalformed.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := testCaps.prescan(tt.b)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("prescan: %v, want accepted", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("prescan: %v, want %q", err, tt.want)
			}
		})
	}
}

// The receive and body limits admit the largest legal request and nothing
// much larger, for the default caps and small ones.
func TestLimitsFitTheLargestRequest(t *testing.T) {
	for _, c := range []caps{testCaps, {DefaultMaxDescriptors, DefaultMaxEntries, DefaultMaxValueLen}} {
		largest := shaped(c.descriptors, c.entries, c.valueLen)
		b := wire(t, largest)
		if len(b) > c.maxWireBytes() {
			t.Errorf("%+v: largest request is %d bytes, receive limit %d", c, len(b), c.maxWireBytes())
		}
		if c.maxWireBytes() > len(b)+len(b)/8+2048 {
			t.Errorf("%+v: receive limit %d is far above the largest request (%d bytes)", c, c.maxWireBytes(), len(b))
		}
		if err := c.prescan(b); err != nil {
			t.Errorf("%+v: prescan refuses the largest request: %v", c, err)
		}
		js, err := protojson.Marshal(largest)
		if err != nil {
			t.Fatal(err)
		}
		if len(js) > c.maxJSONBytes() {
			t.Errorf("%+v: largest JSON request is %d bytes, body cap %d", c, len(js), c.maxJSONBytes())
		}
		if err := c.prescanJSON(bytes.NewReader(js)); err != nil {
			t.Errorf("%+v: prescanJSON refuses the largest request: %v", c, err)
		}
	}
}

// countingReader counts what the scan consumed.
type countingReader struct {
	r *strings.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p[:min(len(p), 512)])
	c.n += n
	return n, err
}

func TestPrescanJSON(t *testing.T) {
	flood := `{"domain":"d","descriptors":[` + strings.Repeat(`{},`, 350_000) + `{}]}`
	tests := []struct {
		name     string
		body     string
		want     string // "" = accepted
		maxRead  int    // 0 = no bound checked
		isSyntax bool
	}{
		{name: "valid", body: `{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}]}]}`},
		{name: "at every cap", body: `{"descriptors":[{},{},{},{"entries":[{},{},{}]}],"domain":"x"}`},
		{name: "nested objects elsewhere", body: `{"domain":"d","descriptors":[{"limit":{"requestsPerUnit":1,"unit":"SECOND"},"entries":[{"key":"k"}],"hitsAddend":"2"}]}`},
		{name: "350k empty descriptors", body: flood, want: "more than the maximum of 4 descriptors", maxRead: 4096},
		{name: "too many entries", body: `{"descriptors":[{"entries":[{},{},{},{}]}]}`, want: "descriptor 0 has more than the maximum of 3 entries"},
		{name: "entries in a second descriptor", body: `{"descriptors":[{"entries":[{}]},{"entries":[{},{},{},{}]}]}`, want: "descriptor 1 has more"},
		{name: "a key named descriptors deeper down is not counted", body: `{"domain":"d","x":{"descriptors":[{},{},{},{},{}]}}`},
		{name: "deep nesting", body: strings.Repeat("[", 100_000), want: "nested deeper than", maxRead: 4096, isSyntax: true},
		{name: "truncated", body: `{"domain":`, want: errJSONSyntax.Error(), isSyntax: true},
		{name: "not JSON", body: `domain=d`, want: errJSONSyntax.Error(), isSyntax: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &countingReader{r: strings.NewReader(tt.body)}
			err := testCaps.prescanJSON(r)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("prescanJSON: %v, want accepted", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("prescanJSON: %v, want %q", err, tt.want)
			}
			if errors.Is(err, errJSONSyntax) != tt.isSyntax {
				t.Errorf("errors.Is(err, errJSONSyntax) = %v, want %v", !tt.isSyntax, tt.isSyntax)
			}
			if tt.maxRead > 0 && r.n > tt.maxRead {
				t.Errorf("read %d of %d bytes before refusing, want at most %d", r.n, len(tt.body), tt.maxRead)
			}
		})
	}
}

// FuzzPrescan: prescan never panics, and it is never looser than decoding
// then validating: whatever it accepts and proto decodes is within the
// descriptor and entry caps and string lengths. Its seed corpus runs in
// every go test.
func FuzzPrescan(f *testing.F) {
	f.Add(wire(f, shaped(4, 3, 8)))
	f.Add(wire(f, shaped(1, 1, 1)))
	f.Add(bytes.Repeat([]byte{0x12, 0x00}, 8))
	f.Add([]byte{0x12, 0x08, 0x0a, 0x00, 0x0a, 0x00, 0x0a, 0x00, 0x0a, 0x00})
	f.Add([]byte{0x0a, 0x09, 'd', 'd', 'd', 'd', 'd', 'd', 'd', 'd', 'd'})
	f.Add([]byte{0x12, 0x05, 0x0a})
	f.Add([]byte{0x0b, 0x12, 0x00, 0x0c}) // a group around a descriptor
	f.Fuzz(func(t *testing.T, b []byte) {
		err := testCaps.prescan(b)
		// A caps error in a prefix (what the codec checks first) is the
		// whole message's error.
		for _, k := range []int{len(b) / 3, len(b) / 2, len(b) - 1} {
			if k < 0 {
				continue
			}
			if perr := testCaps.prescan(b[:k]); perr != nil && !errors.Is(perr, errMalformed) && (err == nil || err.Error() != perr.Error()) {
				t.Fatalf("prefix of %d bytes: %v; whole message: %v", k, perr, err)
			}
		}
		var req rlsv3.RateLimitRequest
		decodeErr := proto.Unmarshal(b, &req)
		if err != nil || decodeErr != nil {
			return
		}
		if len(req.GetDomain()) > testCaps.valueLen || len(req.GetDescriptors()) > testCaps.descriptors {
			t.Fatalf("prescan accepted domain %d bytes, %d descriptors", len(req.GetDomain()), len(req.GetDescriptors()))
		}
		for i, d := range req.GetDescriptors() {
			if len(d.GetEntries()) > testCaps.entries {
				t.Fatalf("prescan accepted %d entries in descriptor %d", len(d.GetEntries()), i)
			}
			for _, e := range d.GetEntries() {
				if len(e.GetKey()) > testCaps.valueLen || len(e.GetValue()) > testCaps.valueLen {
					t.Fatalf("prescan accepted key %d / value %d bytes", len(e.GetKey()), len(e.GetValue()))
				}
			}
		}
	})
}
