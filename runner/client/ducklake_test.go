package client_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/dataenv/dataenv/runner/client"
)

// A real job in every isolation mode: DuckLake catalog in the harness Postgres, data on the
// harness S3 server, both reached over loopback from inside the jail; a second job reads back
// what the first wrote. The S3 keys and the catalog password travel only on stdin.
func TestDuckLakeOnS3FromEveryMode(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			c, root := newClient(t, client.Config{Isolation: mode})
			bucket := s3.Bucket(t)
			schema := "lake_" + strings.ToLower(pg.NamePrefix(t))
			setup := []string{
				fmt.Sprintf("CREATE SECRET s3 (TYPE s3, KEY_ID %s, SECRET %s, REGION %s, ENDPOINT %s, URL_STYLE 'path', USE_SSL false)",
					sqlString(s3.AccessKey), sqlString(s3.SecretKey), sqlString(s3.Region), sqlString(s3.Endpoint)),
				fmt.Sprintf("ATTACH %s AS lake (DATA_PATH %s, METADATA_SCHEMA %s, META_SCHEMA %s)",
					sqlString("ducklake:postgres:"+pg.DSN(pg.CreateDatabase(t))), sqlString("s3://"+bucket+"/lake/"),
					sqlString(schema), sqlString(schema)),
			}
			_, err := c.Run(context.Background(), client.Job{Blocks: append(setup,
				"CREATE TABLE lake.t AS SELECT range AS id FROM range(5000)")})
			if err != nil {
				t.Fatal(err)
			}
			res, err := c.Run(context.Background(), client.Job{Blocks: append(setup,
				"SELECT count(*), sum(id) FROM lake.t"), CollectLastOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			if row := res.Results[0].Rows[0]; string(row[0])+" "+string(row[1]) != "5000 12497500" {
				t.Fatalf("read back %s %s", row[0], row[1])
			}
			assertEmptyDir(t, root)
		})
	}
}

// Credentials in a job's SQL reach the runner on stdin only: no process of its group shows them
// in its command line or environment.
func TestCredentialsNeverInArgvOrEnvironment(t *testing.T) {
	const secret = "s3cr3t-key-9f8e7d"
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			c, root := newClient(t, client.Config{Isolation: mode, WarmSpare: mode == client.IsolationJailed})
			job := started(t, c, root, client.Job{Blocks: []string{
				"CREATE SECRET s3 (TYPE s3, KEY_ID 'AKIAEXAMPLE', SECRET '" + secret + "')", longQuery,
			}, Args: map[string]any{"token": secret}})
			defer job.stop()
			for _, p := range group(job.pgid) {
				for _, f := range []string{"cmdline", "environ"} {
					data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/%s", p.pid, f))
					if strings.Contains(string(data), secret) {
						t.Fatalf("%v: the secret is in /proc/%d/%s", p.argv, p.pid, f)
					}
				}
			}
		})
	}
}
