package ratelimit

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// maxJSONDepth is deeper than any RateLimitRequest in JSON (five levels)
// yet keeps a body of nested brackets from costing more than its bytes.
const maxJSONDepth = 16

// errJSONSyntax wraps what the streaming scan found wrong with the JSON
// itself, as opposed to a request over the caps.
var errJSONSyntax = errors.New("invalid RateLimitRequest JSON")

// jsonRole is what a JSON container is within a RateLimitRequest.
type jsonRole uint8

const (
	roleOther jsonRole = iota + 1
	roleRequest
	roleDescriptors
	roleDescriptor
	roleEntries
)

type jsonFrame struct {
	role      jsonRole
	object    bool
	expectKey bool
	key       string
	entries   int
}

// prescanJSON reads a protojson RateLimitRequest as a token stream and
// stops at the first descriptor or entry over the caps, having read only
// that far: a megabyte of {} is refused after 65 of them.
func (c caps) prescanJSON(r io.Reader) error {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	var stack []jsonFrame
	descriptors := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			if len(stack) == 0 {
				return nil
			}
			return fmt.Errorf("%w: unexpected end of input", errJSONSyntax)
		}
		if err != nil {
			return fmt.Errorf("%w: %w", errJSONSyntax, err)
		}
		var top *jsonFrame
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
			if top.object && top.expectKey {
				if k, ok := tok.(string); ok {
					top.key, top.expectKey = k, false
					continue
				}
			}
		}
		d, isDelim := tok.(json.Delim)
		switch {
		case isDelim && (d == '{' || d == '['):
			if len(stack) == maxJSONDepth {
				return fmt.Errorf("%w: nested deeper than %d", errJSONSyntax, maxJSONDepth)
			}
			role := roleOther
			switch {
			case top == nil && d == '{':
				role = roleRequest
			case top != nil && top.role == roleRequest && top.key == "descriptors" && d == '[':
				role = roleDescriptors
			case top != nil && top.role == roleDescriptors && d == '{':
				if descriptors == c.descriptors {
					return fmt.Errorf("more than the maximum of %d descriptors", c.descriptors)
				}
				descriptors++
				role = roleDescriptor
			case top != nil && top.role == roleDescriptor && top.key == "entries" && d == '[':
				role = roleEntries
			case top != nil && top.role == roleEntries && d == '{':
				if top.entries == c.entries {
					return fmt.Errorf("descriptor %d has more than the maximum of %d entries", descriptors-1, c.entries)
				}
				top.entries++
			}
			stack = append(stack, jsonFrame{role: role, object: d == '{', expectKey: d == '{'})
		case isDelim: // '}' or ']'
			stack = stack[:len(stack)-1]
			if len(stack) > 0 {
				stack[len(stack)-1].expectKey = stack[len(stack)-1].object
			}
		case top != nil:
			top.expectKey = top.object
		}
		if len(stack) == 0 && top != nil {
			// The request's closing brace: anything after it is protojson's
			// to reject, and reading on would only cost more.
			return nil
		}
	}
}
