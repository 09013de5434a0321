// Package apicheck holds a test that keeps the exported API of cohort's
// client libraries usable from other modules: no exported function, method,
// type, field, variable or constant of those packages may mention a type from
// an internal package, which code outside cohort can neither name nor
// implement (go doc would show it, and the user could do nothing with it).
package apicheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// root is the repository's top directory, from this package's folder.
const root = "../.."

// libraries are the directories whose packages other programs import to be
// group members, with every package below them that is not internal.
var libraries = []string{"clock", "member", "election", "workers", "consumer"}

// internalRefs returns, for one package directory, a line for each place an
// exported declaration refers to a package whose import path has an
// "internal" element.
func internalRefs(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		internal := map[string]string{} // local name -> import path
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !isInternal(path) {
				continue
			}
			local := path[strings.LastIndex(path, "/")+1:]
			if imp.Name != nil {
				local = imp.Name.Name
			}
			internal[local] = path
		}
		if len(internal) == 0 {
			continue
		}
		check := func(what string, n ast.Node) {
			if n == nil {
				return
			}
			ast.Inspect(n, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if id, ok := sel.X.(*ast.Ident); ok {
						if path, ok := internal[id.Name]; ok {
							out = append(out, fset.Position(sel.Pos()).String()+": "+what+" uses "+path+"."+sel.Sel.Name)
						}
					}
				}
				// Only the signature and types: not function bodies.
				_, body := n.(*ast.BlockStmt)
				return !body
			})
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() || (d.Recv != nil && !exportedRecv(d.Recv)) {
					continue
				}
				check("func "+d.Name.Name, d.Type)
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							checkType(check, "type "+s.Name.Name, s.Type)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								check(n.Name, s.Type)
								// An untyped var takes its value's type,
								// which the AST does not give; a value
								// written as a selector call is flagged.
								for _, v := range s.Values {
									if c, ok := v.(*ast.CallExpr); ok {
										check(n.Name, c.Fun)
									}
								}
							}
						}
					}
				}
			}
		}
	}
	return out
}

// checkType checks a type declaration's visible parts: for a struct its
// exported and embedded fields, for an interface its methods, otherwise the
// whole type expression.
func checkType(check func(string, ast.Node), what string, typ ast.Expr) {
	switch t := typ.(type) {
	case *ast.StructType:
		for _, f := range t.Fields.List {
			if len(f.Names) == 0 {
				check(what+" (embedded)", f.Type)
				continue
			}
			for _, n := range f.Names {
				if n.IsExported() {
					check(what+"."+n.Name, f.Type)
				}
			}
		}
	default:
		check(what, typ)
	}
}

func exportedRecv(r *ast.FieldList) bool {
	if len(r.List) == 0 {
		return false
	}
	t := r.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.IsExported()
		default:
			return false
		}
	}
}

func isInternal(path string) bool {
	for _, el := range strings.Split(path, "/") {
		if el == "internal" {
			return true
		}
	}
	return false
}

// TestNoInternalTypesInLibraryAPI fails for every exported declaration of a
// client library package that mentions a type from an internal package.
func TestNoInternalTypesInLibraryAPI(t *testing.T) {
	var dirs []string
	for _, lib := range libraries {
		err := filepath.WalkDir(filepath.Join(root, lib), func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() {
				return nil
			}
			if d.Name() == "internal" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			dirs = append(dirs, path)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(dirs) < len(libraries) {
		t.Fatalf("found only %d package directories", len(dirs))
	}
	var bad []string
	for _, dir := range dirs {
		bad = append(bad, internalRefs(t, dir)...)
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Error(b)
	}
}
