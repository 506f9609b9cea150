package objectstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// s3Store is a bucket, optionally below a root prefix, of an S3-compatible server.
type s3Store struct {
	url    string
	bucket string
	root   string // "" or "prefix/"
	client *minio.Client
	creds  Credentials
}

func newS3Store(url string, creds Credentials) (*s3Store, error) {
	rest := strings.TrimSuffix(strings.TrimPrefix(url, "s3://"), "/")
	bucket, root, _ := strings.Cut(rest, "/")
	if bucket == "" {
		return nil, fmt.Errorf("storage url %q: no bucket", url)
	}
	if root != "" {
		root += "/"
	}
	endpoint, ssl := creds.HostPort()
	if endpoint == "" {
		endpoint = "s3.amazonaws.com"
	}
	opts := &minio.Options{Secure: ssl, Region: creds.Region}
	if creds.AccessKeyID != "" {
		opts.Creds = credentials.NewStaticV4(creds.AccessKeyID, creds.SecretAccessKey, creds.SessionToken)
	} else {
		opts.Creds = credentials.NewIAM("")
	}
	if creds.URLStyle == "vhost" {
		opts.BucketLookup = minio.BucketLookupDNS
	} else {
		opts.BucketLookup = minio.BucketLookupPath
	}
	client, err := minio.New(endpoint, opts)
	if err != nil {
		return nil, fmt.Errorf("storage %s: %w", url, err)
	}
	return &s3Store{url: "s3://" + rest, bucket: bucket, root: root, client: client, creds: creds}, nil
}

func (s *s3Store) URL() string { return s.url }

func (s *s3Store) List(ctx context.Context, prefix string) ([]Object, error) {
	var out []Object
	for o := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.root + prefix, Recursive: true}) {
		if o.Err != nil {
			return nil, s.err("list", prefix, o.Err)
		}
		out = append(out, Object{Key: strings.TrimPrefix(o.Key, s.root), Size: o.Size})
	}
	return out, nil
}

func (s *s3Store) DeletePrefix(ctx context.Context, prefix, guard string) (int, error) {
	if err := CheckPrefix(prefix, guard); err != nil {
		return 0, err
	}
	objs, err := s.List(ctx, prefix)
	if err != nil {
		return 0, err
	}
	ch := make(chan minio.ObjectInfo)
	go func() {
		defer close(ch)
		for _, o := range objs {
			select {
			case ch <- minio.ObjectInfo{Key: s.root + o.Key}:
			case <-ctx.Done():
				return
			}
		}
	}()
	deleted := len(objs)
	var first error
	for e := range s.client.RemoveObjectsWithResult(ctx, s.bucket, ch, minio.RemoveObjectsOptions{}) {
		if e.Err != nil {
			deleted--
			if first == nil {
				first = e.Err
			}
		}
	}
	if first == nil && ctx.Err() != nil {
		first = ctx.Err()
	}
	if first != nil {
		return deleted, s.err("delete", prefix, first)
	}
	return deleted, nil
}

// err wraps a store error without any secret in it.
func (s *s3Store) err(op, prefix string, err error) error {
	msg := err.Error()
	for _, sec := range s.creds.Secrets() {
		msg = strings.ReplaceAll(msg, sec, "********")
	}
	return fmt.Errorf("%s %s/%s: %s", op, s.url, prefix, msg)
}
