package fs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoTypeSwitchOnKeyspaceTypes: fs calls the methods of keyspace.File
// and never asks which kind of file it holds. A type assertion or type
// switch on a keyspace type would take the key space's decisions (which
// chunk to push to the page cache, what a file's extended attributes are)
// back into the binding.
func TestNoTypeSwitchOnKeyspaceTypes(t *testing.T) {
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var types []ast.Expr
			switch n := n.(type) {
			case *ast.TypeAssertExpr:
				types = append(types, n.Type) // nil in a type switch's x.(type)
			case *ast.TypeSwitchStmt:
				for _, c := range n.Body.List {
					types = append(types, c.(*ast.CaseClause).List...)
				}
			}
			for _, typ := range types {
				if star, ok := typ.(*ast.StarExpr); ok {
					typ = star.X
				}
				if sel, ok := typ.(*ast.SelectorExpr); ok {
					if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "keyspace" {
						t.Errorf("%s: fs asks whether a value is a keyspace.%s; call a method of keyspace.File instead", fset.Position(typ.Pos()), sel.Sel.Name)
					}
				}
			}
			return true
		})
	}
}
