package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
)

// s3Secret is DuckDB's secret for the harness S3 server: httpfs, path-style URLs, plain HTTP on
// the loopback endpoint.
func s3Secret() string {
	return fmt.Sprintf("CREATE SECRET harness_s3 (TYPE s3, KEY_ID %s, SECRET %s, REGION %s, "+
		"ENDPOINT %s, URL_STYLE 'path', USE_SSL false)",
		sqlString(s3.AccessKey), sqlString(s3.SecretKey), sqlString(s3.Region), sqlString(s3.Endpoint))
}

// The DuckLake round trip with DATA_PATH on the S3 server; the parquet objects are where the
// lake says, and an object-store client lists and deletes that prefix.
func TestDuckLakeRoundTripS3(t *testing.T) {
	ctx := context.Background()
	bucket := s3.Bucket(t)
	prefix := "lakes/" + strings.ToLower(pg.NamePrefix(t)) + "/"
	l := newLake(t, "s3://"+bucket+"/"+prefix)
	secret := s3Secret()
	run(t, secret, l.attach("lake"),
		"CREATE TABLE lake.events (id INTEGER, name VARCHAR)",
		"INSERT INTO lake.events SELECT range, 'event ' || range FROM range(1000)")
	resp := run(t, secret, l.attach("lake"), "SELECT count(*), sum(id), max(name) FROM lake.events")
	row := resp.Results[0].Rows[0]
	if got := fmt.Sprintf("%s %s %s", row[0], row[1], row[2]); got != `1000 499500 "event 999"` {
		t.Fatalf("read back %s", got)
	}
	checkCatalogOnlyIn(t, l)

	mc := s3.Client()
	objects := listObjects(t, mc, bucket, prefix)
	var parquet int
	for _, o := range objects {
		if strings.HasSuffix(o, ".parquet") {
			parquet++
		}
	}
	if parquet == 0 {
		t.Fatalf("no parquet object under s3://%s/%s: %v", bucket, prefix, objects)
	}
	if others := listObjects(t, mc, bucket, ""); len(others) != len(objects) {
		t.Fatalf("objects outside the lake's prefix: %v", others)
	}
	toDelete := make(chan minio.ObjectInfo, len(objects))
	for _, o := range objects {
		toDelete <- minio.ObjectInfo{Key: o}
	}
	close(toDelete)
	for e := range mc.RemoveObjects(ctx, bucket, toDelete, minio.RemoveObjectsOptions{}) {
		t.Fatalf("delete %s: %v", e.ObjectName, e.Err)
	}
	if left := listObjects(t, mc, bucket, prefix); len(left) != 0 {
		t.Fatalf("after deleting the prefix: %v", left)
	}
}

func listObjects(t *testing.T, mc *minio.Client, bucket, prefix string) []string {
	t.Helper()
	var keys []string
	for o := range mc.ListObjects(context.Background(), bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			t.Fatalf("list s3://%s/%s: %v", bucket, prefix, o.Err)
		}
		keys = append(keys, o.Key)
	}
	return keys
}
