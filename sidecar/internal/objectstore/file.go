package objectstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// fileStore is a local directory.
type fileStore struct {
	url  string
	root string
}

func newFileStore(url string) (*fileStore, error) {
	root := filepath.Clean(strings.TrimPrefix(url, "file://"))
	if !filepath.IsAbs(root) || root == "/" {
		return nil, fmt.Errorf("storage url %q: want an absolute directory other than /", url)
	}
	return &fileStore{url: strings.TrimSuffix(url, "/"), root: root}, nil
}

func (s *fileStore) URL() string { return s.url }

func (s *fileStore) List(ctx context.Context, prefix string) ([]Object, error) {
	// Walk the deepest directory the prefix names, then filter by the full prefix.
	dir := filepath.Join(s.root, filepath.FromSlash(prefix[:strings.LastIndex(prefix, "/")+1]))
	var out []Object
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if !strings.HasPrefix(key, prefix) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, Object{Key: key, Size: info.Size()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s/%s: %w", s.url, prefix, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

func (s *fileStore) DeletePrefix(ctx context.Context, prefix, guard string) (int, error) {
	if err := CheckPrefix(prefix, guard); err != nil {
		return 0, err
	}
	objs, err := s.List(ctx, prefix)
	if err != nil {
		return 0, err
	}
	dir := filepath.Join(s.root, filepath.FromSlash(prefix))
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return 0, fmt.Errorf("delete %s/%s: %w", s.url, prefix, err)
	}
	return len(objs), nil
}
