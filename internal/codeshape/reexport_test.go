package codeshape

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoReExports holds each type and constant to one name in one package:
// no alias of another package's type (type X = pkg.Y) and no constant or
// variable that renames another package's under its own name (const X =
// pkg.X), in any Go file but generated ones.
func TestNoReExports(t *testing.T) {
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		for _, at := range reExports(f) {
			t.Errorf("%s: %s re-exports %s: name it where it is defined", fset.Position(at.pos), at.name, at.of)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

type reExport struct {
	pos      token.Pos
	name, of string
}

// reExports lists f's aliases of other packages' types, and its constants
// and variables that take another package's name and value.
func reExports(f *ast.File) []reExport {
	imported := map[string]bool{}
	for _, im := range f.Imports {
		name := strings.Trim(im.Path.Value, `"`)
		name = name[strings.LastIndex(name, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		imported[name] = true
	}
	qualified := func(e ast.Expr) (string, bool) {
		if ix, ok := e.(*ast.IndexExpr); ok {
			e = ix.X
		}
		sel, ok := e.(*ast.SelectorExpr)
		if !ok {
			return "", false
		}
		pkg, ok := sel.X.(*ast.Ident)
		if !ok || !imported[pkg.Name] {
			return "", false
		}
		return pkg.Name + "." + sel.Sel.Name, true
	}
	var out []reExport
	ast.Inspect(f, func(n ast.Node) bool {
		switch s := n.(type) {
		case *ast.TypeSpec:
			if of, ok := qualified(s.Type); ok && s.Assign.IsValid() {
				out = append(out, reExport{s.Pos(), s.Name.Name, of})
			}
		case *ast.ValueSpec:
			for i, name := range s.Names {
				if i >= len(s.Values) {
					break
				}
				if of, ok := qualified(s.Values[i]); ok && strings.HasSuffix(of, "."+name.Name) {
					out = append(out, reExport{name.Pos(), name.Name, of})
				}
			}
		}
		return true
	})
	return out
}
