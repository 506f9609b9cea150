package satellites_test

import (
	"testing"
	"time"

	"github.com/dataenv/dataenv/tests/sidecartest"
	"github.com/dataenv/dataenv/tests/testenv"
)

// The sidecar's leader prunes satellites' finished requests past --request-retention (default 7
// days) as it does the control's: old finished rows go, recent and unfinished ones stay, and
// the satellite keeps serving.
func TestSidecarPrunesSatelliteRequestsPastRetention(t *testing.T) {
	c := newControl(t)
	s := newSatellite(t, c)
	seed := pg.Connect(t, s.DB)
	// Written behind the satellite's triggers: no envelopes, finished long ago.
	testenv.MustExec(t, seed, `SET session_replication_role = replica`)
	testenv.MustExec(t, seed, `INSERT INTO dataenv.requests (kind, status, created_at, finished_at, error)
		SELECT 'ping', 'succeeded', now() - interval '30 days', now() - interval '30 days', 'old' FROM generate_series(1, 5)`)
	testenv.MustExec(t, seed, `INSERT INTO dataenv.requests (kind, status, finished_at, error)
		SELECT 'ping', 'failed', now() - interval '1 day', 'recent' FROM generate_series(1, 2)`)
	sidecartest.Start(t, sidecartest.Options{DSN: c.DSN})
	waitStreaming(t, c.Conn)

	testenv.Eventually(t, 60*time.Second, "the leader to prune the satellite's old finished requests", func() bool {
		return testenv.Query[int](t, s.Conn, `SELECT count(*) FROM dataenv.requests WHERE error = 'old'`) == 0
	})
	if n := testenv.Query[int](t, s.Conn, `SELECT count(*) FROM dataenv.requests WHERE error = 'recent'`); n != 2 {
		t.Fatalf("%d recent finished requests left, want 2", n)
	}
	if row := waitDone(t, s.Conn, ping(t, s.Conn)); row.Status != "succeeded" {
		t.Fatalf("a ping after the prune finished %s (error %v)", row.Status, row.Error)
	}
}
