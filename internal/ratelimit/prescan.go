package ratelimit

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// errMalformed is the answer to bytes that are not a protobuf message.
var errMalformed = errors.New("request is not a valid RateLimitRequest protobuf")

// Field numbers of envoy.service.ratelimit.v3.RateLimitRequest and of the
// common ratelimit.v3 RateLimitDescriptor and its Entry.
const (
	fieldRequestDomain      = 1
	fieldRequestDescriptors = 2
	fieldDescriptorEntries  = 1
	fieldEntryKey           = 1
	fieldEntryValue         = 2
)

// prescan walks a RateLimitRequest's wire bytes and rejects it when it
// holds more descriptors, entries or longer strings than the caps allow,
// before anything is allocated: decoding two million empty descriptors
// costs hundreds of megabytes, counting them costs nothing. It does not
// replace validate, which still runs on the decoded request; it only has
// to stop shapes whose decoding would be the attack.
func (c caps) prescan(b []byte) error {
	descriptors := 0
	for {
		num, v, rest, err := nextBytesField(b, fieldRequestDomain, fieldRequestDescriptors)
		if err != nil || num == 0 {
			return err
		}
		b = rest
		if num == fieldRequestDomain {
			if len(v) > c.valueLen {
				return fmt.Errorf("domain is %d bytes long, more than the maximum of %d", len(v), c.valueLen)
			}
			continue
		}
		if descriptors == c.descriptors {
			return fmt.Errorf("more than the maximum of %d descriptors", c.descriptors)
		}
		if err := c.prescanDescriptor(v, descriptors); err != nil {
			return err
		}
		descriptors++
	}
}

func (c caps) prescanDescriptor(b []byte, i int) error {
	entries := 0
	for {
		num, v, rest, err := nextBytesField(b, fieldDescriptorEntries, fieldDescriptorEntries)
		if err != nil || num == 0 {
			return err
		}
		b = rest
		if entries == c.entries {
			return fmt.Errorf("descriptor %d has more than the maximum of %d entries", i, c.entries)
		}
		if err := c.prescanEntry(v, i, entries); err != nil {
			return err
		}
		entries++
	}
}

func (c caps) prescanEntry(b []byte, i, j int) error {
	for {
		num, v, rest, err := nextBytesField(b, fieldEntryKey, fieldEntryValue)
		if err != nil || num == 0 {
			return err
		}
		b = rest
		if len(v) > c.valueLen {
			what := "key"
			if num == fieldEntryValue {
				what = "value"
			}
			return fmt.Errorf("descriptor %d entry %d %s is %d bytes long, more than the maximum of %d", i, j, what, len(v), c.valueLen)
		}
	}
}

// nextBytesField skips b's fields up to the next length-delimited one
// numbered x or y and returns its number, its payload and the bytes after
// it; num is 0 when b ends first. Every field skipped must be well formed.
func nextBytesField(b []byte, x, y protowire.Number) (num protowire.Number, v, rest []byte, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, nil, nil, errMalformed
		}
		b = b[n:]
		if typ == protowire.BytesType && (num == x || num == y) {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return 0, nil, nil, errMalformed
			}
			return num, v, b[n:], nil
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return 0, nil, nil, errMalformed
		}
		b = b[n:]
	}
	return 0, nil, nil, nil
}

// maxWireBytes is the size of the largest RateLimitRequest the caps admit,
// with room for every optional field: the gRPC receive limit, so a message
// no valid request can reach is refused before it is even read.
func (c caps) maxWireBytes() int {
	str := func(n int) int { return 1 + protowire.SizeVarint(uint64(n)) + n } // tag, length, bytes
	entry := str(str(c.valueLen) + str(c.valueLen))
	// A descriptor's limit override and hits_addend wrapper take < 64 bytes.
	desc := str(c.entries*entry + 64)
	// The domain, the request's hits_addend and slack for unknown fields.
	return c.descriptors*desc + str(c.valueLen) + 1024
}

// maxJSONBytes is the /json body cap: the same request in protojson, each
// entry as {"key":"…","value":"…"} with its strings unescaped. A request
// needing many escapes may be refused as too large although it would be
// valid; real descriptors are short.
func (c caps) maxJSONBytes() int {
	entry := len(`{"key":"","value":""},`) + 2*c.valueLen
	desc := len(`{"entries":[]},`) + c.entries*entry + 128
	return c.descriptors*desc + c.valueLen + 4096
}
