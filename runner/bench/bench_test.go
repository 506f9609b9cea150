package bench_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/dataenv/dataenv/runner/bench"
	"github.com/dataenv/dataenv/runner/client"
	"github.com/dataenv/dataenv/tests/testenv"
)

var (
	pg         *testenv.Postgres
	runnerPath string
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(ctx context.Context) (err error) {
		if runnerPath, err = testenv.BuildRunner(ctx); err != nil {
			return err
		}
		pg, err = testenv.StartPostgres(ctx, testenv.PGOptions{Name: "runner-bench"})
		return err
	})
}

// Overhead runs every variant and reports them; no timing is asserted here (make bench
// reports the numbers).
func TestOverheadReportsEveryVariant(t *testing.T) {
	rep, err := bench.Overhead(context.Background(), bench.Config{
		Client:     client.Config{RunnerPath: runnerPath},
		CatalogDSN: pg.DSN(pg.CreateDatabase(t)),
		Iterations: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.InProcess.Median <= 0 || rep.Spawned.Median <= 0 || rep.WarmSpare.Median <= 0 || rep.WarmSpareWatched.Median <= 0 || rep.Isolation == "" {
		t.Fatalf("incomplete report: %+v", rep)
	}
	if s := rep.String(); !strings.Contains(s, "warm spare runner") {
		t.Fatalf("report:\n%s", s)
	}
	if os.Getenv("DATAENV_BENCH_PRINT") != "" {
		t.Log("\n" + rep.String())
	}
}

// BenchmarkOverhead prints the report; go test -bench Overhead -run XXX ./runner/bench.
func BenchmarkOverhead(b *testing.B) {
	db := pg.CreateDatabase(b)
	rep, err := bench.Overhead(context.Background(), bench.Config{
		Client: client.Config{RunnerPath: runnerPath}, CatalogDSN: pg.DSN(db), Iterations: 20,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(rep.InProcess.Median.Microseconds())/1000, "inprocess-ms")
	b.ReportMetric(float64(rep.Spawned.Median.Microseconds())/1000, "spawned-ms")
	b.ReportMetric(float64(rep.WarmSpare.Median.Microseconds())/1000, "warm-ms")
	b.Log("\n" + rep.String())
}
