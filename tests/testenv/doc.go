// Package testenv starts the real components tests run against: PostgreSQL clusters (from the
// machine's binaries through sidecar/localpg, or with testcontainers-go when a Docker engine
// answers and DATAENV_TEST_DOCKER=1) and an S3 server (versitygw over a temporary directory).
//
// One set of components per test package, started from TestMain, and isolation per test through
// a database, a role, a bucket or a name prefix:
//
//	var pg *testenv.Postgres
//
//	func TestMain(m *testing.M) {
//		testenv.Main(m, func(ctx context.Context) (err error) {
//			pg, err = testenv.StartPostgres(ctx, testenv.PGOptions{Name: "control"})
//			return err
//		})
//	}
//
//	func TestSomething(t *testing.T) {
//		conn := pg.Connect(t, pg.CreateDatabase(t))
//		...
//	}
//
// Everything started through testenv is registered and stopped by Main after m.Run, also when
// tests fail, when setup fails or panics, and on SIGINT/SIGTERM. When the test binary dies in a
// way no Go code survives (a panic in a test goroutine, a -timeout, SIGKILL), the processes and
// temporary directories are still removed: each component has a sidecar/procguard guard that
// fires when this process is gone.
package testenv
