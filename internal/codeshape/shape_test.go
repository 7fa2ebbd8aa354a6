// Package codeshape holds the project's own limits on the shape of its code,
// checked on every test run: no Go function over maxFuncLines lines and no Go
// file over maxFileLines, outside tests and generated code, unless a comment
// at the top of the file says why it is one piece ("one piece:").
package codeshape

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	maxFuncLines = 80
	maxFileLines = 500
)

func TestCodeShape(t *testing.T) {
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		checkFile(t, path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func checkFile(t *testing.T, path string) {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	if ast.IsGenerated(f) {
		return
	}
	onePiece := false
	for _, c := range f.Comments {
		if c.Pos() < f.Package && strings.Contains(c.Text(), "one piece:") {
			onePiece = true
		}
	}
	if lines := fset.Position(f.End()).Line; lines > maxFileLines && !onePiece {
		t.Errorf("%s: %d lines, over %d: split it by concern, or say at its top why it is one piece (\"one piece: ...\")", path, lines, maxFileLines)
	}
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
		if n > maxFuncLines && !onePiece {
			t.Errorf("%s: func %s is %d lines, over %d", path, fn.Name.Name, n, maxFuncLines)
		}
	}
}
