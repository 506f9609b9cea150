package objectstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestCheckPrefixGuard(t *testing.T) {
	guard := "__dataenv_forks/dev_1234abcd/"
	for prefix, ok := range map[string]bool{
		"__dataenv_forks/dev_1234abcd/lakes/main/": true,
		"__dataenv_forks/dev_1234abcd/":            true,
		"__dataenv_forks/dev_1234abcd":             false, // no trailing slash
		"__dataenv_forks/dev_1234abcdX/":           false, // a sibling
		"lakes/main/":                              false,
		"__dataenv_forks/dev_1234abcd/../../":      false,
		"__dataenv_forks/dev_1234abcd//x/":         false,
		"":                                         false,
	} {
		if err := CheckPrefix(prefix, guard); (err == nil) != ok {
			t.Errorf("CheckPrefix(%q): %v", prefix, err)
		}
	}
	if err := CheckPrefix("x/", ""); !errors.Is(err, ErrGuard) {
		t.Errorf("empty guard: %v", err)
	}
}

func TestFileStoreDeletesOnlyThePrefix(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{"__dataenv_forks/a_1/lakes/x.parquet", "__dataenv_forks/a_1/lakes/sub/y.parquet",
		"__dataenv_forks/a_10/lakes/z.parquet", "lakes/main/p.parquet"} {
		p := filepath.Join(root, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte("x"), 0o644)
	}
	s, err := Open("file://"+root, Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if n, b, _ := Count(ctx, s, "__dataenv_forks/a_1/"); n != 2 || b != 2 {
		t.Fatalf("count %d %d", n, b)
	}
	if _, err := s.DeletePrefix(ctx, "lakes/main/", "__dataenv_forks/a_1/"); !errors.Is(err, ErrGuard) {
		t.Fatalf("delete outside the guard: %v", err)
	}
	if n, err := s.DeletePrefix(ctx, "__dataenv_forks/a_1/lakes/", "__dataenv_forks/a_1/"); err != nil || n != 2 {
		t.Fatalf("delete: %d %v", n, err)
	}
	left, _ := s.List(ctx, "")
	if len(left) != 2 || left[0].Key != "__dataenv_forks/a_10/lakes/z.parquet" || left[1].Key != "lakes/main/p.parquet" {
		t.Fatalf("left %v", left)
	}
	if n, err := s.DeletePrefix(ctx, "__dataenv_forks/a_1/lakes/", "__dataenv_forks/a_1/"); err != nil || n != 0 {
		t.Fatalf("second delete: %d %v", n, err)
	}
}
