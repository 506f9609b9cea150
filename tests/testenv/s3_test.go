package testenv_test

import (
	"bytes"
	"context"
	"io"
	"slices"
	"testing"

	"github.com/minio/minio-go/v7"
)

func TestS3BucketPutListDeletePrefix(t *testing.T) {
	ctx := context.Background()
	bucket := s3.Bucket(t)
	c := s3.Client()
	for _, key := range []string{"lake/a/1.parquet", "lake/a/2.parquet", "lake/b/1.parquet", "other/x"} {
		body := []byte("content of " + key)
		if _, err := c.PutObject(ctx, bucket, key, bytes.NewReader(body), int64(len(body)),
			minio.PutObjectOptions{}); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
	}
	if got := list(t, c, bucket, "lake/a/"); !slices.Equal(got, []string{"lake/a/1.parquet", "lake/a/2.parquet"}) {
		t.Fatalf("list lake/a/: %v", got)
	}
	obj, err := c.GetObject(ctx, bucket, "lake/b/1.parquet", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(obj)
	if err != nil || string(body) != "content of lake/b/1.parquet" {
		t.Fatalf("get: %q, %v", body, err)
	}
	// Delete the prefix lake/ and nothing else.
	objects := c.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: "lake/", Recursive: true})
	for e := range c.RemoveObjects(ctx, bucket, objects, minio.RemoveObjectsOptions{}) {
		if e.Err != nil {
			t.Fatalf("remove %s: %v", e.ObjectName, e.Err)
		}
	}
	if got := list(t, c, bucket, ""); !slices.Equal(got, []string{"other/x"}) {
		t.Fatalf("after deleting lake/: %v", got)
	}
}

func TestS3BucketIsRemovedAtCleanup(t *testing.T) {
	ctx := context.Background()
	var bucket string
	t.Run("inner", func(t *testing.T) {
		bucket = s3.Bucket(t)
		if _, err := s3.Client().PutObject(ctx, bucket, "k", bytes.NewReader([]byte("v")), 1,
			minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	exists, err := s3.Client().BucketExists(ctx, bucket)
	if err != nil || exists {
		t.Fatalf("bucket %s after its test: exists=%v err=%v", bucket, exists, err)
	}
}

func list(t *testing.T, c *minio.Client, bucket, prefix string) []string {
	t.Helper()
	var keys []string
	for obj := range c.ListObjects(context.Background(), bucket,
		minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		keys = append(keys, obj.Key)
	}
	slices.Sort(keys)
	return keys
}
