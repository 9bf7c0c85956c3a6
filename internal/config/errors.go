package config

import (
	"fmt"
	"strconv"
)

// Error is one load error, located so an operator can fix it without
// guessing: file, line and the field's path in the document.
type Error struct {
	File  string
	Line  int    // 1-based; 0 when the error is about the file as a whole
	Field string // e.g. descriptors[0].rate_limit.unit; empty if none
	Msg   string
}

// Error renders file:line: field: message, omitting the parts that are unset.
func (e *Error) Error() string {
	s := e.File
	if e.Line > 0 {
		s += ":" + strconv.Itoa(e.Line)
	}
	if e.Field != "" {
		s += ": " + e.Field
	}
	return s + ": " + e.Msg
}

// maxErrorsPerFile keeps a pathological file (say, one alias expanded into
// thousands of bad nodes) from producing an unreadable, huge report.
const maxErrorsPerFile = 50

// errorList collects every error of one load so that all bad files and all
// bad fields are reported at once.
type errorList struct {
	errs    []error
	perFile map[string]int
}

func (l *errorList) add(file string, line int, field, format string, args ...any) {
	if l.perFile == nil {
		l.perFile = map[string]int{}
	}
	l.perFile[file]++
	switch n := l.perFile[file]; {
	case n < maxErrorsPerFile:
		l.errs = append(l.errs, &Error{File: file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
	case n == maxErrorsPerFile:
		l.errs = append(l.errs, &Error{File: file, Msg: "too many errors; the rest are not reported"})
	}
}
