package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kerr"
)

// outputFlag is --output: "table" (aligned columns for people) or "json"
// (one JSON document, the schema of docs/cli.md, for scripts).
type outputFlag struct{ format string }

func (o *outputFlag) register(fs *flag.FlagSet) {
	fs.StringVar(&o.format, "output", "table", "`format` of the result: table or json")
}

func (o *outputFlag) check() error {
	if o.format != "table" && o.format != "json" {
		return usagef("--output %q: want table or json", o.format)
	}
	return nil
}

func (o *outputFlag) json() bool { return o.format == "json" }

// writeJSON writes v as indented JSON and a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// newTable returns a writer that aligns tab-separated columns; Flush it.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// orDash formats an optional number, "-" when absent.
func orDash[T int32 | int64](v *T) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatInt(int64(*v), 10)
}

// strOrDash is s, or "-" when it is empty.
func strOrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// deref is *p, or the zero value when p is nil.
func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }

// serverError is an error code from the server with the server's own
// message, which says more than the code's generic text: it reads
// "CODE_NAME: message" and still matches the code with errors.Is.
type serverError struct {
	err error
	msg string
}

func (s serverError) Error() string {
	var ke *kerr.Error
	if errors.As(s.err, &ke) {
		return ke.Message + ": " + s.msg
	}
	return s.err.Error() + ": " + s.msg
}

func (s serverError) Unwrap() error { return s.err }

// withMessage attaches the server's message (when it sent one) to err. A
// message that only repeats the code's name, as some servers send (cohort's
// security admin APIs, for one), is dropped: err then reads "CODE_NAME:
// generic text".
func withMessage(err error, msg string) error {
	var ke *kerr.Error
	if err == nil || msg == "" || errors.As(err, &ke) && (msg == ke.Message || msg == ke.Description) {
		return err
	}
	return serverError{err, msg}
}

// answerErr is the error of key's entry in an answer keyed by name
// (errOf gives the server's message and the entry's error), or an error
// saying the answer lacks key.
func answerErr[R any](rs map[string]R, key string, errOf func(R) (string, error)) error {
	r, ok := rs[key]
	if !ok {
		return fmt.Errorf("no answer for %s", key)
	}
	msg, err := errOf(r)
	return withMessage(err, msg)
}

// errText is err's text, or nil (JSON null) without an error.
func errText(err error) *string {
	if err == nil {
		return nil
	}
	return ptr(err.Error())
}

// result is the RESULT column: ok, or the error.
func result(err error, ok string) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return ok
}

// checkNoArgs is the usage error of a command given arguments it does not
// take; one longer than a Kafka string is given by its length, not
// repeated.
func checkNoArgs(cmd string, pos []string) error {
	for _, a := range pos {
		if len(a) > maxKafkaString {
			return usagef("%s: unexpected argument of %d bytes: cohort %s takes no arguments", cmd, len(a), cmd)
		}
	}
	if len(pos) > 0 {
		return usagef("%s: unexpected arguments %q", cmd, pos)
	}
	return nil
}
