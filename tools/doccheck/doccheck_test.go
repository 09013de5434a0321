// Package doccheck holds a test that keeps the documentation's commands true:
// every `go test` command in README.md and docs/ must name packages that exist
// and -run, -bench and -fuzz patterns that select at least one test, benchmark
// or fuzz target there, and every test function the prose names must exist.
// A test renamed or removed without its docs fails here, not in the hands of
// a reader trying to reproduce a figure.
//
// Sections whose heading starts with "History" or says "not reproducible" are
// skipped: they record figures of older commits, named by hash.
package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// root is the repository's top directory, from this package's folder.
const root = "../.."

// funcs are the test functions of one package directory, by kind.
type funcs struct {
	run   []string // Test*, Example*, Fuzz*: what -run selects
	bench []string // Benchmark*
	fuzz  []string // Fuzz*
}

// testFuncs reads every _test.go file of every package directory under root
// (whatever its build tags) and returns the test functions by directory,
// relative to root with forward slashes ("store/disk").
func testFuncs(t *testing.T) map[string]*funcs {
	t.Helper()
	out := map[string]*funcs{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "data") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		fs := out[rel]
		if fs == nil {
			fs = &funcs{}
			out[rel] = fs
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Recv != nil {
				continue
			}
			name := fd.Name.Name
			switch {
			case strings.HasPrefix(name, "Test"), strings.HasPrefix(name, "Example"):
				fs.run = append(fs.run, name)
			case strings.HasPrefix(name, "Benchmark"):
				fs.bench = append(fs.bench, name)
			case strings.HasPrefix(name, "Fuzz"):
				fs.run = append(fs.run, name)
				fs.fuzz = append(fs.fuzz, name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// docFiles are the documents checked: README.md and docs/*.md. The CHANGELOG
// is history by nature and is not checked.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(root, "README.md"))
	sort.Strings(files)
	if len(files) < 5 {
		t.Fatalf("found only %d documents under %s: is the test run from its own folder?", len(files), root)
	}
	return files
}

// historical reports whether a heading opens a section of figures from older
// commits, which the rule lets stand with their commit hash.
func historical(heading string) bool {
	h := strings.ToLower(heading)
	return strings.HasPrefix(h, "history") || strings.Contains(h, "not reproducible")
}

// section is a stretch of a document under one heading: its prose (lines
// joined by spaces, so that code spans broken over lines are whole) and the
// lines of its fenced code blocks (continuations joined).
type section struct {
	file, heading string
	line          int // of the heading
	prose         string
	code          []string
}

var headingRE = regexp.MustCompile(`^(#{1,6})\s+(.*)$`)

// sections splits a document into sections, leaving out historical ones and
// everything nested under them.
func sections(t *testing.T, file string) []section {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var (
		out       []section
		cur       = section{file: file, line: 1}
		prose     []string
		inFence   bool
		pending   string
		skipLevel = 0 // level of the historical heading being skipped, or 0
	)
	flush := func() {
		cur.prose = strings.Join(prose, " ")
		if skipLevel == 0 {
			out = append(out, cur)
		}
		prose = nil
	}
	for i, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			if pending != "" {
				cur.code = append(cur.code, pending)
				pending = ""
			}
			continue
		}
		if inFence {
			if s, ok := strings.CutSuffix(strings.TrimRight(line, " "), `\`); ok {
				pending += s + " "
				continue
			}
			cur.code = append(cur.code, pending+line)
			pending = ""
			continue
		}
		if m := headingRE.FindStringSubmatch(line); m != nil {
			flush()
			level := len(m[1])
			if skipLevel != 0 && level <= skipLevel {
				skipLevel = 0
			}
			if skipLevel == 0 && historical(m[2]) {
				skipLevel = level
			}
			cur = section{file: file, heading: m[2], line: i + 1}
			continue
		}
		prose = append(prose, line)
	}
	flush()
	return out
}

var (
	codeSpanRE = regexp.MustCompile("`[^`]+`")
	checkoutOf = regexp.MustCompile(`\bon a checkout of [0-9a-f]{7}`)
)

// commands returns the `go test` commands of a section: from its code spans
// and its code blocks.
func (s section) commands() []string {
	var out []string
	for _, loc := range codeSpanRE.FindAllStringIndex(s.prose, -1) {
		if checkoutOf.MatchString(s.prose[loc[1]:min(len(s.prose), loc[1]+30)]) {
			continue // a command run on an older commit, named by the prose
		}
		out = append(out, goTests(strings.Trim(s.prose[loc[0]:loc[1]], "`"))...)
	}
	for _, line := range s.code {
		out = append(out, goTests(line)...)
	}
	return out
}

// goTests returns each `go test` command in text, from "go test" to the end
// of the shell command (";", "&&", "|", a closing parenthesis or the end).
func goTests(text string) []string {
	var out []string
	for {
		i := strings.Index(text, "go test")
		if i < 0 {
			return out
		}
		text = text[i:]
		end := len(text)
		quote := byte(0)
	scan:
		for j := 0; j < len(text); j++ {
			c := text[j]
			switch {
			case quote != 0:
				if c == quote {
					quote = 0
				}
			case c == '\'' || c == '"':
				quote = c
			case c == ';' || c == '&' || c == '|' || c == ')' || c == '#':
				end = j
				break scan
			}
		}
		out = append(out, text[:end])
		text = text[end:]
		if end == 0 {
			text = text[1:]
		}
	}
}

// shellWords splits a command into words, removing single and double quotes.
func shellWords(s string) []string {
	var (
		words []string
		cur   strings.Builder
		in    bool
		quote byte
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote = c
			in = true
		case c == ' ' || c == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// parsed is what a `go test` command selects.
type parsed struct {
	pkgs              []string // as written: "./store/disk/", "./..."
	run, bench, fuzz  string
	hasRun, hasBench  bool
	hasFuzz, unparsed bool
}

func parse(cmd string) parsed {
	var p parsed
	if strings.ContainsAny(cmd, "<>") {
		p.unparsed = true // a placeholder the reader fills in
		return p
	}
	words := shellWords(cmd)
	for i := 2; i < len(words); i++ {
		w := words[i]
		flag, val, hasVal := strings.Cut(strings.TrimLeft(w, "-"), "=")
		if strings.HasPrefix(w, "-") {
			switch flag {
			case "run", "bench", "fuzz":
				if !hasVal {
					if i+1 >= len(words) {
						p.unparsed = true
						return p
					}
					i++
					val = words[i]
				}
				switch flag {
				case "run":
					p.run, p.hasRun = val, true
				case "bench":
					p.bench, p.hasBench = val, true
				case "fuzz":
					p.fuzz, p.hasFuzz = val, true
				}
			case "count", "benchtime", "fuzztime", "timeout", "tags", "o", "p", "parallel", "cpu", "exec", "coverprofile", "cpuprofile", "memprofile", "mutexprofile", "blockprofile", "trace", "outputdir":
				if !hasVal {
					i++ // the flag's value
				}
			}
			continue
		}
		if strings.HasPrefix(w, "./") || w == "." {
			p.pkgs = append(p.pkgs, strings.TrimRight(w, ","))
		}
	}
	return p
}

// splitTop splits a pattern at sep where it is not inside parentheses or
// brackets, as `go test` splits -run at slashes.
func splitTop(pattern string, sep byte) []string {
	var (
		out   []string
		depth int
		start int
	)
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; {
		case c == '\\':
			i++
		case c == '(' || c == '[':
			depth++
		case c == ')' || c == ']':
			depth--
		case c == sep && depth == 0:
			out = append(out, pattern[start:i])
			start = i + 1
		}
	}
	return append(out, pattern[start:])
}

// problems reports what of a pattern selects nothing among names: the
// pattern's top level (before any "/"), and each of its "|" alternatives, must
// match at least one name. A pattern matching the empty name (such as "^$",
// written to run no tests) asks for nothing.
func problems(kind, pattern string, names []string) []string {
	top := splitTop(pattern, '/')[0]
	re, err := regexp.Compile(top)
	if err != nil {
		return []string{kind + " pattern " + pattern + " does not compile: " + err.Error()}
	}
	if re.MatchString("") {
		return nil
	}
	var out []string
	for _, alt := range splitTop(top, '|') {
		re, err := regexp.Compile(alt)
		if err != nil {
			continue // part of a larger construct; the whole compiled
		}
		found := false
		for _, n := range names {
			if re.MatchString(n) {
				found = true
				break
			}
		}
		if !found {
			out = append(out, kind+" "+alt+" (of "+pattern+") selects nothing")
		}
	}
	return out
}

// packages resolves a command's package arguments to directories.
func packages(pkgs []string, all map[string]*funcs) (dirs []string, missing []string) {
	for _, p := range pkgs {
		p = strings.TrimPrefix(p, "./")
		p = strings.TrimSuffix(p, "/")
		if p == "..." || p == "." || p == "" {
			for d := range all {
				dirs = append(dirs, d)
			}
			continue
		}
		if sub, ok := strings.CutSuffix(p, "/..."); ok {
			n := 0
			for d := range all {
				if d == sub || strings.HasPrefix(d, sub+"/") {
					dirs = append(dirs, d)
					n++
				}
			}
			if n == 0 {
				if _, err := os.Stat(filepath.Join(root, sub)); err != nil {
					missing = append(missing, p)
				}
			}
			continue
		}
		if _, ok := all[p]; !ok {
			if _, err := os.Stat(filepath.Join(root, p)); err != nil {
				missing = append(missing, p)
				continue
			}
		}
		dirs = append(dirs, p)
	}
	return dirs, missing
}

func TestDocumentedCommandsSelectTests(t *testing.T) {
	all := testFuncs(t)
	checked := 0
	for _, file := range docFiles(t) {
		rel, _ := filepath.Rel(root, file)
		for _, s := range sections(t, file) {
			for _, cmd := range s.commands() {
				p := parse(cmd)
				if p.unparsed || len(p.pkgs) == 0 {
					continue // no package named: run in a folder the prose names
				}
				dirs, missing := packages(p.pkgs, all)
				where := rel + " (section \"" + s.heading + "\")"
				for _, m := range missing {
					t.Errorf("%s: `%s`: package %s does not exist", where, cmd, m)
				}
				var f funcs
				for _, d := range dirs {
					if fs := all[d]; fs != nil {
						f.run = append(f.run, fs.run...)
						f.bench = append(f.bench, fs.bench...)
						f.fuzz = append(f.fuzz, fs.fuzz...)
					}
				}
				var probs []string
				if p.hasRun {
					probs = append(probs, problems("-run", p.run, f.run)...)
				}
				if p.hasBench {
					probs = append(probs, problems("-bench", p.bench, f.bench)...)
				}
				if p.hasFuzz {
					probs = append(probs, problems("-fuzz", p.fuzz, f.fuzz)...)
				}
				for _, pr := range probs {
					t.Errorf("%s: `%s`: %s in %v", where, cmd, pr, p.pkgs)
				}
				checked++
			}
		}
	}
	if checked < 100 {
		t.Fatalf("checked only %d commands: the parser no longer finds them", checked)
	}
	t.Logf("%d documented go test commands checked", checked)
}

var testNameRE = regexp.MustCompile(`\b(?:Test|Benchmark|Fuzz)[A-Z0-9_]\w*(?:\*|…|\.\.\.)?`)

// formerly marks prose that names a test on purpose although it is gone: a
// renamed or removed test, or a run on an older checkout.
var formerly = regexp.MustCompile(`(?i)\bformer\b|\(was\b|\bwas named\b|\bremoved\b|\bno longer\b|\brenamed\b|\bcheckout of\b`)

// nameProblem reports what is wrong with a test name the prose gives, or "".
// A name ending in "*" or "…" names a family (every test it begins); "nn" in
// a family stands for a number (TestCnn_… is TestC01_…, TestC02_…).
func nameProblem(name string, known map[string]bool) string {
	family := false
	for _, suffix := range []string{"*", "…", "..."} {
		if n, ok := strings.CutSuffix(name, suffix); ok {
			name, family = n, true
		}
	}
	if !family {
		if known[name] {
			return ""
		}
		return name + " is named but no such test function exists"
	}
	re := regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(name), "nn", `\d+`))
	for k := range known {
		if re.MatchString(k) {
			return ""
		}
	}
	return name + "… is named as a family of tests but no test function begins so"
}

// TestDocumentedTestsExist checks that every test, benchmark or fuzz target
// the prose names in a code span or a code block exists somewhere in the
// repository. Spans holding a command are left to
// TestDocumentedCommandsSelectTests (their names are patterns), and prose that
// says a test was renamed or removed may name it.
func TestDocumentedTestsExist(t *testing.T) {
	all := testFuncs(t)
	known := map[string]bool{}
	for _, fs := range all {
		for _, n := range fs.run {
			known[n] = true
		}
		for _, n := range fs.bench {
			known[n] = true
		}
	}
	named := 0
	for _, file := range docFiles(t) {
		rel, _ := filepath.Rel(root, file)
		for _, s := range sections(t, file) {
			var texts []string
			for _, loc := range codeSpanRE.FindAllStringIndex(s.prose, -1) {
				around := s.prose[max(0, loc[0]-40):min(len(s.prose), loc[1]+100)]
				if formerly.MatchString(around) {
					continue
				}
				texts = append(texts, s.prose[loc[0]:loc[1]])
			}
			texts = append(texts, s.code...)
			for _, text := range texts {
				if strings.Contains(text, "go test") || strings.Contains(text, "-run") || strings.Contains(text, "-bench") || strings.Contains(text, "-fuzz") {
					continue
				}
				for _, name := range testNameRE.FindAllString(text, -1) {
					named++
					if p := nameProblem(name, known); p != "" {
						t.Errorf("%s (section %q): %s", rel, s.heading, p)
					}
				}
			}
		}
	}
	if named < 100 {
		t.Fatalf("found only %d test names: the parser no longer finds them", named)
	}
	t.Logf("%d test names checked", named)
}

// The parser's own cases: what it must find in the shapes the docs use.
func TestParse(t *testing.T) {
	cmds := goTests("COHORT_BENCH=1 go test -run 'TestA|TestB/x' -v ./bench/ && go test -bench=Foo ./a/... ; echo")
	if len(cmds) != 2 {
		t.Fatalf("found %d commands in %q", len(cmds), cmds)
	}
	p := parse(cmds[0])
	if !p.hasRun || p.run != "TestA|TestB/x" || len(p.pkgs) != 1 || p.pkgs[0] != "./bench/" {
		t.Fatalf("first: %+v", p)
	}
	p = parse(cmds[1])
	if !p.hasBench || p.bench != "Foo" || p.pkgs[0] != "./a/..." {
		t.Fatalf("second: %+v", p)
	}
	names := []string{"TestA", "TestBravo", "FuzzC"}
	if got := problems("-run", "TestA|TestGone/sub", names); len(got) != 1 || !strings.Contains(got[0], "TestGone") {
		t.Fatalf("a stale alternative must be reported: %q", got)
	}
	if got := problems("-run", "^$", names); got != nil {
		t.Fatalf("^$ asks for nothing: %q", got)
	}
	if got := problems("-run", "(TestA|TestBr)avo$", names); got != nil {
		t.Fatalf("a group is one alternative: %q", got)
	}
	known := map[string]bool{"TestC07_Join": true, "TestWALFillZero": true}
	for name, ok := range map[string]bool{"TestC07_Join": true, "TestCnn_…": true, "TestWALFill*": true, "TestWALFill": false, "TestGone…": false, "TestC_…": false} {
		if got := nameProblem(name, known); (got == "") != ok {
			t.Errorf("nameProblem(%q) = %q", name, got)
		}
	}
	if got := splitTop(`A/(b/c)|[/]`, '/'); len(got) != 2 {
		t.Fatalf("splitTop: %q", got)
	}
}

// TestChangelogEntriesHaveText: every entry of CHANGELOG.md (a "###"
// heading) says something before the next heading. Two commits that each
// add an entry under a heading of their own, and are then merged into one
// entry, can leave the first heading standing empty above the second.
func TestChangelogEntriesHaveText(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	empty := func(heading string) {
		t.Errorf("CHANGELOG.md: the entry %q has no text before the next heading", heading)
	}
	open, entries := "", 0
	for line := range strings.Lines(string(b)) {
		line = strings.TrimRight(line, "\r\n")
		switch {
		case strings.HasPrefix(line, "#"):
			if open != "" {
				empty(open)
			}
			open = ""
			if strings.HasPrefix(line, "### ") {
				open = line
				entries++
			}
		case strings.TrimSpace(line) != "":
			open = ""
		}
	}
	if open != "" {
		empty(open)
	}
	if entries < 10 {
		t.Fatalf("found only %d entries: is CHANGELOG.md still written with ### headings?", entries)
	}
}
