package rlqs

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

var errMalformed = errors.New("bytes that are not a RateLimitQuotaUsageReports")

// field is one field of a message on the wire: its bytes or its varint.
type field struct {
	num protowire.Number
	typ protowire.Type
	val []byte
	x   uint64
}

// eachField calls fn with every length-delimited and varint field of b,
// skipping the fields of other wire types (as protobuf treats a known
// field of an unexpected type: unknown).
func eachField(b []byte, fn func(f field) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errMalformed
		}
		b = b[n:]
		f := field{num: num, typ: typ}
		switch typ {
		case protowire.BytesType:
			f.val, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			f.x, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return errMalformed
		}
		b = b[n:]
		if typ == protowire.BytesType || typ == protowire.VarintType {
			if err := fn(f); err != nil {
				return err
			}
		}
	}
	return nil
}

// pair is one entry of a bucket id, in the wire bytes.
type pair struct{ k, v []byte }

// decode reads a RateLimitQuotaUsageReports: domain (1) and
// bucket_quota_usages (2), within the caps.
func (r *report) decode(b []byte) error {
	// Sized first, so that growing them leaves no garbage.
	n, size := 0, 0
	if err := eachField(b, func(f field) error {
		if f.num == 2 && f.typ == protowire.BytesType {
			n, size = n+1, size+len(f.val)
		}
		return nil
	}); err != nil {
		return err
	}
	r.usages = make([]usage, 0, min(n, r.caps.buckets))
	r.keys = make([]byte, 0, size)
	var scratch []pair
	return eachField(b, func(f field) error {
		if f.typ != protowire.BytesType {
			return nil
		}
		switch f.num {
		case 1:
			if len(f.val) > r.caps.valueLen {
				return fmt.Errorf("domain: %d bytes, at most %d", len(f.val), r.caps.valueLen)
			}
			if !utf8.Valid(f.val) {
				return fmt.Errorf("%w: domain: not UTF-8", errMalformed)
			}
			r.domain = string(f.val)
		case 2:
			if len(r.usages) >= r.caps.buckets {
				return fmt.Errorf("bucket_quota_usages: more than %d buckets in one report", r.caps.buckets)
			}
			scratch = scratch[:0]
			u, err := r.decodeUsage(f.val, len(r.usages), &scratch)
			if err != nil {
				return err
			}
			r.usages = append(r.usages, u)
		}
		return nil
	})
}

// decodeUsage reads BucketQuotaUsage i: bucket_id (1, a BucketId, merged
// if repeated), time_elapsed (2), num_requests_allowed (3) and
// num_requests_denied (4); its bucket key goes to r.keys.
func (r *report) decodeUsage(b []byte, i int, pairs *[]pair) (usage, error) {
	var u usage
	var negative bool
	err := eachField(b, func(f field) error {
		switch {
		case f.num == 1 && f.typ == protowire.BytesType:
			u.hasID = true
			return r.decodeID(f.val, i, pairs)
		case f.num == 2 && f.typ == protowire.BytesType:
			return eachField(f.val, func(d field) error {
				switch {
				case d.num == 1 && d.typ == protowire.VarintType:
					u.elapsed = int64(d.x)
				case d.num == 2 && d.typ == protowire.VarintType:
					negative = negative || int32(d.x) < 0
				}
				return nil
			})
		case f.num == 3 && f.typ == protowire.VarintType:
			u.allowed = f.x
		case f.num == 4 && f.typ == protowire.VarintType:
			u.denied = f.x
		}
		return nil
	})
	if err != nil {
		return u, err
	}
	if negative && u.elapsed >= 0 {
		u.elapsed = -1
	}
	u.key[0] = uint32(len(r.keys))
	r.keys, u.pairs = appendKey(r.keys, *pairs)
	u.key[1] = uint32(len(r.keys))
	return u, nil
}

// decodeID reads a BucketId's map entries (1), each a key (1) and a
// value (2).
func (r *report) decodeID(b []byte, i int, pairs *[]pair) error {
	return eachField(b, func(f field) error {
		if f.num != 1 || f.typ != protowire.BytesType {
			return nil
		}
		if len(*pairs) >= r.caps.entries {
			return fmt.Errorf("bucket_quota_usages[%d].bucket_id: more than %d entries", i, r.caps.entries)
		}
		var p pair
		err := eachField(f.val, func(e field) error {
			if e.typ != protowire.BytesType || (e.num != 1 && e.num != 2) {
				return nil
			}
			if len(e.val) > r.caps.valueLen {
				return fmt.Errorf("bucket_quota_usages[%d].bucket_id: a key or value of %d bytes, at most %d", i, len(e.val), r.caps.valueLen)
			}
			if !utf8.Valid(e.val) {
				return fmt.Errorf("%w: bucket_quota_usages[%d].bucket_id: not UTF-8", errMalformed, i)
			}
			if e.num == 1 {
				p.k = e.val
			} else {
				p.v = e.val
			}
			return nil
		})
		*pairs = append(*pairs, p)
		return err
	})
}

// appendKey appends the bucket key of pairs to dst (bucketKey: sorted by
// key, each string length-prefixed, a repeated key's last value), and how
// many pairs it holds.
func appendKey(dst []byte, pairs []pair) ([]byte, int) {
	slices.SortStableFunc(pairs, func(a, b pair) int { return bytes.Compare(a.k, b.k) })
	n := 0
	for i, p := range pairs {
		if i+1 < len(pairs) && bytes.Equal(p.k, pairs[i+1].k) {
			continue // a later entry of the same key wins
		}
		for _, s := range [][]byte{p.k, p.v} {
			dst = strconv.AppendInt(dst, int64(len(s)), 10)
			dst = append(dst, ':')
			dst = append(dst, s...)
		}
		n++
	}
	return dst, n
}
