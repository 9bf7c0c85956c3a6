// Package yamldoc is what the strict YAML readers (internal/config's rule
// files, pkg/middleware's routes file) share: where a syntax error really
// is, where bytes stop being UTF-8, and the dotted path of a field.
package yamldoc

import (
	"bytes"
	"errors"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// maxLocateBytes bounds the files whose syntax errors are located by
// re-parsing prefixes: a few dozen parses of at most this much.
const maxLocateBytes = 1 << 20

// SyntaxError returns the line of a YAML syntax error and its message.
// yaml.v3 reports where the enclosing construct began (and, for parser
// errors, counts that line from 0), so a bad indent on line 6 inside a
// mapping opened on line 3 is reported "at line 2". The problem is on the
// first line at which a prefix of the file fails with the same message:
// found by binary search over prefixes, starting from yaml's line, which is
// never after it. If the search cannot confirm a line, yaml's stands.
func SyntaxError(data []byte, err error) (int, string) {
	line, msg := yamlLine(err)
	if len(data) > maxLocateBytes {
		return line, msg
	}
	starts := lineStarts(data)
	fails := func(n int) bool { // does the prefix of n lines fail with msg?
		end := len(data)
		if n < len(starts) {
			end = starts[n]
		}
		var doc yaml.Node
		dec := yaml.NewDecoder(bytes.NewReader(data[:end]))
		for {
			e := dec.Decode(&doc)
			if e == nil {
				continue
			}
			if errors.Is(e, io.EOF) {
				return false
			}
			_, m := yamlLine(e)
			return m == msg
		}
	}
	lo := max(line-1, 0)
	n := lo + sort.Search(len(starts)-lo, func(i int) bool { return fails(lo + i + 1) }) + 1
	if n > len(starts) || !fails(n) {
		return line, msg
	}
	return n, msg
}

// lineStarts is the byte offset of each line's first byte.
func lineStarts(data []byte) []int {
	starts := []int{0}
	for i, b := range data {
		if b == '\n' && i+1 < len(data) {
			starts = append(starts, i+1)
		}
	}
	return starts
}

// InvalidUTF8 finds the first byte that is not UTF-8, by line and column
// (in bytes, from 1). yaml.v3 refuses such a file without saying where.
// A file with a UTF-16 byte order mark is left to yaml, which reads it.
func InvalidUTF8(data []byte) (line, col int, bad bool) {
	if bytes.HasPrefix(data, []byte{0xfe, 0xff}) || bytes.HasPrefix(data, []byte{0xff, 0xfe}) {
		return 0, 0, false
	}
	line, col = 1, 1
	for len(data) > 0 {
		r, size := utf8.DecodeRune(data)
		if r == utf8.RuneError && size <= 1 {
			return line, col, true
		}
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col += size
		}
		data = data[size:]
	}
	return 0, 0, false
}

// lineRE matches the prefix of yaml's own error texts ("yaml: line 3: ...").
var lineRE = regexp.MustCompile(`^yaml: line (\d+): `)

// yamlLine is the line yaml's own error text names, 0 if none, and the
// text without its "yaml: line N: " or "yaml: " prefix.
func yamlLine(err error) (int, string) {
	msg := err.Error()
	m := lineRE.FindStringSubmatch(msg)
	if m == nil {
		return 0, strings.TrimPrefix(msg, "yaml: ")
	}
	line, _ := strconv.Atoi(m[1])
	return line, msg[len(m[0]):]
}

// Join is the path of key in field ("" for the document): field.key.
func Join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}
