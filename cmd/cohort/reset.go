package main

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Reset modes: exactly one is given.
const (
	modeToOffset   = "to-offset"
	modeShiftBy    = "shift-by"
	modeToEarliest = "to-earliest"
	modeToLatest   = "to-latest"
	modeToDatetime = "to-datetime"
	modeByDuration = "by-duration"
	modeFromFile   = "from-file"
)

// resetModes lists the modes in the order usage messages name them.
var resetModes = []string{modeToOffset, modeShiftBy, modeToEarliest, modeToLatest, modeToDatetime, modeByDuration, modeFromFile}

// needsLog reports whether mode reads the data cluster's log (it has no
// meaning without --data-bootstrap).
func needsLog(mode string) bool {
	switch mode {
	case modeToEarliest, modeToLatest, modeToDatetime, modeByDuration:
		return true
	}
	return false
}

// resetMode is the parsed mode of "offsets reset".
type resetMode struct {
	name   string
	offset int64        // to-offset
	shift  int64        // shift-by
	at     time.Time    // to-datetime, by-duration (resolved against the clock)
	file   map[tp]int64 // from-file
}

// planRow is one partition of a reset plan.
type planRow struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	CurrentOffset *int64 `json:"current_offset"` // null: nothing committed
	// RequestedOffset is what the mode asks for; NewOffset what is (or
	// would be) committed: RequestedOffset clamped to the log, or null when
	// the partition is left as it is (Note says why).
	RequestedOffset *int64  `json:"requested_offset"`
	NewOffset       *int64  `json:"new_offset"`
	LogStartOffset  *int64  `json:"log_start_offset"`
	LogEndOffset    *int64  `json:"log_end_offset"`
	Note            string  `json:"note"`
	Error           *string `json:"error"` // --execute: the commit's error
}

// planReset computes the new offset of every partition of scope. committed
// holds the group's committed offsets; logs the data cluster's log-start
// and log-end offsets (nil without --data-bootstrap: no clamping, offsets
// only kept from going below 0); atTime the offsets of to-datetime and
// by-duration.
func planReset(mode resetMode, scope []tp, committed map[tp]int64, logs map[tp]logRange, atTime map[tp]int64) []planRow {
	rows := make([]planRow, 0, len(scope))
	for _, k := range scope {
		r := planRow{Topic: k.topic, Partition: k.partition}
		if c, ok := committed[k]; ok {
			r.CurrentOffset = ptr(c)
		}
		lr, haveLog := logs[k]
		if haveLog {
			r.LogStartOffset, r.LogEndOffset = ptr(lr.start), ptr(lr.end)
		}
		var want int64
		switch mode.name {
		case modeToOffset:
			want = mode.offset
		case modeFromFile:
			want = mode.file[k]
		case modeShiftBy:
			if r.CurrentOffset == nil {
				r.Note = "nothing committed to shift from: unchanged"
				rows = append(rows, r)
				continue
			}
			want = addSaturating(*r.CurrentOffset, mode.shift)
		case modeToEarliest:
			want = lr.start
		case modeToLatest:
			want = lr.end
		case modeToDatetime, modeByDuration:
			o, ok := atTime[k]
			if !ok {
				r.Note = "the data cluster has no offset for the time: unchanged"
				rows = append(rows, r)
				continue
			}
			want = o
		}
		if logs != nil && !haveLog {
			r.Note = "not on the data cluster: unchanged"
			rows = append(rows, r)
			continue
		}
		r.RequestedOffset = ptr(want)
		got := want
		switch {
		case logs != nil && want < lr.start:
			got, r.Note = lr.start, fmt.Sprintf("below the log start %d: clamped", lr.start)
		case logs != nil && want > lr.end:
			got, r.Note = lr.end, fmt.Sprintf("above the log end %d: clamped", lr.end)
		case want < 0:
			got, r.Note = 0, "below 0: clamped"
		}
		r.NewOffset = ptr(got)
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b planRow) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return rows
}

// addSaturating is a+b held within int64: a shift past either end stops
// there (and is then clamped like any offset) instead of wrapping to the
// other side, where a huge forward shift read as an offset below 0.
func addSaturating(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}

// parseTopicSpec parses --topic T or T:P[,P...].
func parseTopicSpec(s string) (string, []int32, error) {
	topic, parts, hasParts := strings.Cut(s, ":")
	if topic == "" {
		return "", nil, usagef("--topic %q: want TOPIC or TOPIC:PARTITION[,PARTITION...]", s)
	}
	if !hasParts {
		return topic, nil, nil
	}
	var ps []int32
	for _, p := range strings.Split(parts, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
		if err != nil || n < 0 {
			return "", nil, usagef("--topic %q: partition %q is not a partition number", s, p)
		}
		if !slices.Contains(ps, int32(n)) {
			ps = append(ps, int32(n))
		}
	}
	return topic, ps, nil
}

// parseDatetime parses --to-datetime: YYYY-MM-DDTHH:MM:SS[.sss] followed by
// Z, ±HH:MM, ±HHMM or ±HH, or by nothing, which is UTC: kafka-consumer-groups
// reads a time without a zone as UTC (Utils.getDateTime appends a Z), so a
// runbook's time means the same here whatever the machine's time zone.
func parseDatetime(s string) (time.Time, error) {
	for _, layout := range []string{"2006-01-02T15:04:05Z07:00", "2006-01-02T15:04:05Z0700", "2006-01-02T15:04:05Z07"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	if t, err := time.ParseInLocation("2006-01-02T15:04:05", s, time.UTC); err == nil {
		return t, nil
	}
	return time.Time{}, usagef("--to-datetime %q: want YYYY-MM-DDTHH:MM:SS[.sss], UTC, or followed by Z or ±HH:MM", s)
}

var isoDuration = regexp.MustCompile(`^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$`)

// parseDuration parses --by-duration: a Go duration (90m, 1h30m) or an
// ISO-8601 one as Kafka's tool takes (P1D, PT1H30M, P1DT12H); positive.
func parseDuration(s string) (time.Duration, error) {
	bad := usagef("--by-duration %q: want a positive duration such as 90m, 1h30m, PT1H30M or P1D", s)
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return 0, bad
		}
		return d, nil
	}
	m := isoDuration.FindStringSubmatch(strings.ToUpper(s))
	if m == nil || s == "P" || strings.HasSuffix(strings.ToUpper(s), "T") {
		return 0, bad
	}
	// Added up in float64, where nothing wraps: converted term by term, a
	// term past time.Duration became its smallest value, and two of them
	// wrapped back to zero (P99999999999999DT99999999999999H1S read as 1s).
	var ns float64
	for i, unit := range []time.Duration{24 * time.Hour, time.Hour, time.Minute, time.Second} {
		if m[i+1] == "" {
			continue
		}
		f, err := strconv.ParseFloat(m[i+1], 64)
		if err != nil {
			return 0, bad
		}
		ns += f * float64(unit)
	}
	if ns >= math.MaxInt64 {
		return 0, usagef("--by-duration %q: longer than the longest duration cohort can count (about 292 years)", s)
	}
	d := time.Duration(ns)
	if d <= 0 {
		return 0, bad
	}
	return d, nil
}

// maxCSVLines bounds a --from-file plan.
const maxCSVLines = 1_000_000

// readResetFile reads --from-file: one topic,partition,offset line per
// partition (the format of kafka-consumer-groups --export); blank lines and
// lines starting with # are skipped. A malformed file is a usage error.
func readResetFile(name string) (map[tp]int64, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("--from-file: %w", err)
	}
	defer f.Close()
	return parseResetCSV(f, name)
}

func parseResetCSV(r io.Reader, name string) (map[tp]int64, error) {
	out := map[tp]int64{}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		if line > maxCSVLines {
			return nil, usagef("--from-file %s: more than %d lines", name, maxCSVLines)
		}
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Split(text, ",")
		if len(fields) != 3 {
			return nil, usagef("--from-file %s:%d: want topic,partition,offset", name, line)
		}
		topic := strings.TrimSpace(fields[0])
		p, perr := strconv.ParseInt(strings.TrimSpace(fields[1]), 10, 32)
		o, oerr := strconv.ParseInt(strings.TrimSpace(fields[2]), 10, 64)
		if topic == "" || perr != nil || p < 0 || oerr != nil || o < 0 {
			return nil, usagef("--from-file %s:%d: %q: want topic,partition,offset with a partition and offset of 0 or more", name, line, text)
		}
		k := tp{topic, int32(p)}
		if _, dup := out[k]; dup {
			return nil, usagef("--from-file %s:%d: %s partition %d appears twice", name, line, topic, p)
		}
		out[k] = o
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--from-file %s: %w", name, err)
	}
	if len(out) == 0 {
		return nil, usagef("--from-file %s: no topic,partition,offset lines", name)
	}
	return out, nil
}

// errNothingToReset is the error of --execute when no partition of the plan
// gets a new offset.
var errNothingToReset = errors.New("no partition of the plan has a new offset: nothing committed")
