package lakecompare_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/runner/client"
	"github.com/dataenv/dataenv/runner/engine"
	"github.com/dataenv/dataenv/runner/extension"
	"github.com/dataenv/dataenv/runner/protocol"
	"github.com/dataenv/dataenv/tests/sidecartest"
	"github.com/dataenv/dataenv/tests/testenv"
)

var (
	pg         *testenv.Postgres
	s3         *testenv.S3
	runnerPath string
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(ctx context.Context) error {
		var err error
		if pg, err = testenv.StartPostgres(ctx, testenv.PGOptions{Name: "control"}); err != nil {
			return err
		}
		if s3, err = testenv.StartS3(ctx); err != nil {
			return err
		}
		if runnerPath, err = testenv.BuildRunner(ctx); err != nil {
			return err
		}
		_, err = sidecartest.Binary()
		return err
	})
}

func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// queries cover types whose JSON encoding must survive the trip (decimal, date, timestamp, list,
// struct, NULL, unicode) and the column order.
var queries = []string{
	"SELECT z, a, m FROM (SELECT 3 AS z, 'é' AS a, NULL::INT AS m)",
	"SELECT id, amount, day, tags, info FROM dl.orders ORDER BY id",
	"SELECT day, count(*) AS n, sum(amount) AS total, avg(amount) AS mean FROM dl.orders GROUP BY day ORDER BY day",
	"SELECT * FROM dl.summary ORDER BY k",
}

const setup = `CREATE OR REPLACE TABLE dl.orders AS
SELECT range AS id, (range * 37 % 1000)::DECIMAL(12,2) / 7 AS amount, DATE '2026-01-01' + (range % 30)::INT AS day,
       [range % 3, range % 5] AS tags, {'k': range % 4, 'v': 'x' || range} AS info
FROM range(3000)`

func TestRunAndMaterializeMatchInProcess(t *testing.T) {
	for _, kind := range []string{"local", "s3"} {
		t.Run(kind, func(t *testing.T) {
			db := pg.CreateDatabase(t)
			dsn := pg.DSN(db)
			sidecartest.Install(t, dsn)
			conn := pg.Connect(t, db)
			catalog := pg.CreateDatabase(t)
			var url, secret string
			if kind == "local" {
				url = "file://" + t.TempDir()
				mustExec(t, conn, `SELECT dataenv.add_storage('st', $1)`, url)
			} else {
				url = "s3://" + s3.Bucket(t)
				mustExec(t, conn, `SELECT dataenv.add_storage('st', $1, $2::jsonb)`, url, fmt.Sprintf(
					`{"endpoint": "http://%s", "region": %q, "access_key_id": %q, "secret_access_key": %q}`, s3.Endpoint, s3.Region, s3.AccessKey, s3.SecretKey))
				secret = fmt.Sprintf("CREATE SECRET (TYPE s3, KEY_ID %s, SECRET %s, REGION %s, ENDPOINT %s, URL_STYLE 'path', USE_SSL false)",
					sqlString(s3.AccessKey), sqlString(s3.SecretKey), sqlString(s3.Region), sqlString(s3.Endpoint))
			}
			mustExec(t, conn, `SELECT dataenv.create_workspace('prod')`)
			mustExec(t, conn, `SELECT dataenv.add_lake('prod', 'main', 'instance', $1, 'st', 'lakes/main')`, catalog)
			t.Cleanup(func() { dropSlot(conn) })
			sidecartest.Start(t, sidecartest.Options{DSN: dsn, Env: []string{client.EnvRunnerPath + "=" + runnerPath, "DATAENV_JOB_ISOLATION=plain"}})
			attach := "ATTACH 'ducklake://main' AS dl;\n"
			wait(t, conn, `SELECT dataenv.run('prod', $1)`, attach+setup+";\nSELECT 1")
			wait(t, conn, `SELECT dataenv.materialize('prod', 'ducklake://main/summary', $1)`,
				attach+"SELECT tags[1] AS k, count(*) AS n, sum(amount) AS total FROM dl.orders GROUP BY 1")

			dataPath := strings.TrimPrefix(url, "file://") + "/lakes/main/"
			local := fmt.Sprintf("ATTACH %s AS dl (DATA_PATH %s)", sqlString("ducklake:postgres:"+pg.DSN(catalog)), sqlString(dataPath))
			for _, q := range queries {
				res := wait(t, conn, `SELECT dataenv.run('prod', $1)`, attach+q)
				var got protocol.Result
				if err := json.Unmarshal(res, &got); err != nil {
					t.Fatal(err)
				}
				blocks := []string{local, q}
				if secret != "" {
					blocks = append([]string{secret}, blocks...)
				}
				want := inProcess(t, blocks...)
				if !reflect.DeepEqual(got.Columns, want.Columns) || !sameRows(got.Rows, want.Rows) {
					t.Fatalf("%s:\n dataenv.run: %v %s\n in-process:  %v %s", q, got.Columns, rows(got.Rows), want.Columns, rows(want.Rows))
				}
			}
		})
	}
}

func rows(r [][]json.RawMessage) string {
	b, _ := json.Marshal(r)
	if len(b) > 400 {
		b = append(b[:400], "..."...)
	}
	return string(b)
}

func sameRows(a, b [][]json.RawMessage) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func inProcess(t *testing.T, blocks ...string) protocol.Result {
	t.Helper()
	dir, err := extension.Dir()
	if err != nil {
		t.Fatal(err)
	}
	resp := engine.Run(context.Background(), &protocol.Request{Blocks: blocks, ExtensionDirectory: dir, CollectLastOnly: true,
		TempDirectory: filepath.Join(t.TempDir(), "spill")}, nil)
	if resp.Error != "" {
		t.Fatalf("in-process block %d: %s", resp.ErrorBlock, resp.Error)
	}
	return resp.Results[len(resp.Results)-1]
}

// wait makes a request with sql and its argument and returns its result; it must succeed.
func wait(t *testing.T, conn *pgx.Conn, sql, arg string) json.RawMessage {
	t.Helper()
	var id uuid.UUID
	if err := conn.QueryRow(context.Background(), sql, arg).Scan(&id); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	row := sidecartest.Wait(t, conn, id, 120*time.Second)
	if row.Status != "succeeded" {
		t.Fatalf("%s: %s %v", arg, row.Status, *row.Error)
	}
	return row.Result
}

// dropSlot removes the database's replication slot so that the database can be dropped.
func dropSlot(conn *pgx.Conn) { sidecartest.DropSlot(conn) }

// SQL helpers of the test harness, by this package's names.
var (
	mustExec = testenv.MustExec
)
