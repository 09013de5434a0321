package assign

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"strings"
	"testing"
)

// TestTypeChecksWith32BitInts type-checks the package with the sizes of a
// 32-bit build (GOARCH=386 or arm), where int holds 32 bits: the assignors
// are a library that consumers on small machines compile too, and a
// constant of the package that only fits a 64-bit int breaks their build.
// (The standard library is imported as this machine builds it; the check
// is on this package's own code.)
func TestTypeChecksWith32BitInts(t *testing.T) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		n := e.Name()
		if !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil), Sizes: types.SizesFor("gc", "386")}
	if _, err := conf.Check("github.com/cohort-dev/cohort/consumer/assign", fset, files, nil); err != nil {
		t.Fatalf("with 32-bit ints: %v", err)
	}
}
