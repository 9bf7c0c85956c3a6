// Package redact keeps secrets (Redis passwords, the admin token) out of
// everything ratelimitd prints. The daemon builds one Redactor from its
// settings and puts it under its root logger's encoder, so no call site can
// log a secret, whatever error or field it logs: a client library's error
// quoting a URL, a value in a field added by With, a stack trace.
package redact

import (
	"cmp"
	"net/url"
	"slices"
	"strings"

	"go.uber.org/zap/buffer"
	"go.uber.org/zap/zapcore"
)

// Mask replaces every secret.
const Mask = "xxxxx"

// Redactor replaces secrets in text. The zero value and nil replace
// nothing.
type Redactor struct {
	r *strings.Replacer
}

// New returns a Redactor of secrets (empty ones are ignored), each also in
// the forms it takes in a log line: escaped in a JSON string, and
// percent-encoded in a URL's userinfo, path or query.
func New(secrets ...string) *Redactor {
	var forms []string
	for _, s := range secrets {
		if s == "" {
			continue
		}
		forms = append(forms, s, jsonEscaped(s), url.QueryEscape(s), url.PathEscape(s),
			strings.TrimPrefix(url.UserPassword("", s).String(), ":"))
	}
	if len(forms) == 0 {
		return &Redactor{}
	}
	// At one position the longest form wins, so that a secret containing
	// another is masked whole.
	slices.SortFunc(forms, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	forms = slices.Compact(forms)
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f, Mask)
	}
	return &Redactor{r: strings.NewReplacer(pairs...)}
}

// String returns s with every secret masked.
func (r *Redactor) String(s string) string {
	if r == nil || r.r == nil {
		return s
	}
	return r.r.Replace(s)
}

// Error returns err with its message masked; errors.Is and errors.As still
// see err.
func (r *Redactor) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := r.String(err.Error())
	if msg == err.Error() {
		return err
	}
	return &redacted{msg: msg, err: err}
}

type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }

// Encoder wraps enc so that every line it encodes is masked as a whole,
// after encoding: the message, every field (however it was added), the
// caller and the stack trace.
func (r *Redactor) Encoder(enc zapcore.Encoder) zapcore.Encoder {
	if r == nil || r.r == nil {
		return enc
	}
	return encoder{Encoder: enc, r: r}
}

type encoder struct {
	zapcore.Encoder
	r *Redactor
}

func (e encoder) Clone() zapcore.Encoder { return encoder{Encoder: e.Encoder.Clone(), r: e.r} }

func (e encoder) EncodeEntry(ent zapcore.Entry, fields []zapcore.Field) (*buffer.Buffer, error) {
	buf, err := e.Encoder.EncodeEntry(ent, fields)
	if err != nil {
		return buf, err
	}
	line := buf.String()
	if masked := e.r.String(line); masked != line {
		buf.Reset()
		buf.AppendString(masked)
	}
	return buf, nil
}

// jsonEscaped is s as zap's JSON encoder writes it inside a string (the
// console encoder writes fields as JSON too).
func jsonEscaped(s string) string {
	enc := zapcore.NewJSONEncoder(zapcore.EncoderConfig{MessageKey: "m"})
	buf, err := enc.EncodeEntry(zapcore.Entry{Message: s}, nil)
	if err != nil {
		return s
	}
	defer buf.Free()
	out, ok := strings.CutPrefix(strings.TrimSuffix(buf.String(), "}\n"), `{"m":"`)
	if !ok {
		return s
	}
	return strings.TrimSuffix(out, `"`)
}
