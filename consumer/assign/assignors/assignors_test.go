package assignors_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/consumer/assign"
	"github.com/cohort-dev/cohort/consumer/assign/assignors"
	"github.com/cohort-dev/cohort/consumer/assign/sticky"
)

// shipped are the constructors of every assignor cohort ships, by the
// package and function name TestEveryConstructorIsListed finds them under.
var shipped = map[string]func() assign.Assignor{
	"assign.Range":          assign.Range,
	"assign.RoundRobin":     assign.RoundRobin,
	"assign.Copartition":    func() assign.Assignor { return assign.Copartition() },
	"assign.Redundant":      func() assign.Assignor { return assign.Redundant(assign.DefaultRedundantReplicas, nil) },
	"assign.RackAware":      assign.RackAware,
	"sticky.New":            sticky.New,
	"sticky.NewCooperative": sticky.NewCooperative,
}

// Every shipped assignor is found under its Name(), and what ByName returns
// announces that name again, eager or cooperative as the original.
func TestByNameFindsEveryShippedAssignor(t *testing.T) {
	names := assignors.Names()
	for ctor, mk := range shipped {
		a := mk()
		got, ok := assignors.ByName(a.Name())
		if !ok {
			t.Errorf("%s: ByName(%q) found nothing", ctor, a.Name())
			continue
		}
		if got.Name() != a.Name() {
			t.Errorf("%s: ByName(%q).Name() = %q", ctor, a.Name(), got.Name())
		}
		if got.Cooperative() != a.Cooperative() {
			t.Errorf("%s: ByName(%q) cooperative %v, the constructor's %v", ctor, a.Name(), got.Cooperative(), a.Cooperative())
		}
		if !slices.Contains(names, a.Name()) {
			t.Errorf("%s: Names() = %q lacks %q", ctor, names, a.Name())
		}
	}
	if len(names) != len(shipped) {
		t.Errorf("Names() = %q: %d names for %d shipped assignors", names, len(names), len(shipped))
	}
	for _, n := range names {
		if a, ok := assignors.ByName(n); !ok || a.Name() != n {
			t.Errorf("Names() lists %q, which ByName does not round-trip", n)
		}
	}
	for _, n := range assign.Names() {
		if _, ok := assignors.ByName(n); !ok {
			t.Errorf("assign.ByName knows %q, assignors.ByName does not", n)
		}
	}
	if a, ok := assignors.ByName("no-such-assignor"); ok {
		t.Errorf("ByName(no-such-assignor) = %v, true", a.Name())
	}
}

// A new exported function of package assign or sticky that returns an
// assign.Assignor must be added to shipped (and so to ByName).
func TestEveryConstructorIsListed(t *testing.T) {
	for pkg, dir := range map[string]string{"assign": "..", "sticky": "../sticky"} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Recv != nil || !fd.Name.IsExported() || fd.Type.Results == nil || len(fd.Type.Results.List) != 1 {
					continue
				}
				if !returnsAssignor(fd.Type.Results.List[0].Type) {
					continue
				}
				if _, ok := shipped[pkg+"."+fd.Name.Name]; !ok {
					t.Errorf("%s.%s returns an assign.Assignor but is not in shipped: add it there and make assignors.ByName find it", pkg, fd.Name.Name)
				}
			}
		}
	}
}

func returnsAssignor(e ast.Expr) bool {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name == "Assignor"
	case *ast.SelectorExpr:
		return x.Sel.Name == "Assignor"
	}
	return false
}
