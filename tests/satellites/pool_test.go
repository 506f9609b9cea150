package satellites_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/dataenv/dataenv/tests/sidecartest"
	"github.com/dataenv/dataenv/tests/testenv"
)

// More satellites than connections: requests spread over six satellites all finish while the
// sidecar never holds more connections to satellites than --satellite-connections, and
// dataenv.sidecar_status reports the satellites, the connections and the envelopes waiting.
func TestConnectionsToSatellitesStayWithinTheFlag(t *testing.T) {
	c := newControl(t)
	var sats []satellite
	for range 6 {
		sats = append(sats, newSatellite(t, c))
	}
	const limit = 2
	// No sidecar yet: envelopes wait, and the status says so.
	first := ping(t, sats[0].Conn)
	if n := testenv.Query[int](t, c.Conn, `SELECT satellite_envelopes_waiting FROM dataenv.sidecar_status
		UNION ALL SELECT count(*) FROM dataenv.requests WHERE kind = 'satellite' AND status = 'pending' LIMIT 1`); n != 1 {
		t.Fatalf("envelopes waiting with no sidecar: %d, want 1", n)
	}
	sidecartest.Start(t, sidecartest.Options{DSN: c.DSN, Args: []string{"--satellite-connections", "2"}})
	if row := waitDone(t, sats[0].Conn, first); row.Status != "succeeded" {
		t.Fatalf("first ping finished %s (error %v)", row.Status, row.Error)
	}

	var peak atomic.Int64
	stop := make(chan struct{})
	watcher := pg.Connect(t, "postgres")
	var watched sync.WaitGroup
	watched.Add(1)
	go func() {
		defer watched.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			var n int64
			if err := watcher.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
				WHERE application_name = 'dataenv_satellite_envelopes'`).Scan(&n); err != nil {
				t.Errorf("count satellite connections: %v", err)
				return
			}
			if n > peak.Load() {
				peak.Store(n)
			}
		}
	}()
	var wg sync.WaitGroup
	for _, s := range sats {
		conn := pg.Connect(t, s.DB)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ids []uuid.UUID
			for range 15 {
				ids = append(ids, ping(t, conn))
			}
			for _, id := range ids {
				if row := waitDone(t, conn, id); row.Status != "succeeded" {
					t.Errorf("ping %s in %s finished %s (error %v)", id, s.DB, row.Status, row.Error)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	watched.Wait()
	if p := peak.Load(); p > limit || p == 0 {
		t.Fatalf("the sidecar held up to %d connections to satellites, want between 1 and --satellite-connections %d", p, limit)
	}
	testenv.Eventually(t, 30e9, "the heartbeat to report the satellite connections", func() bool {
		return testenv.Query[int](t, c.Conn, `SELECT count(*) FROM dataenv.sidecar_status WHERE leader AND satellites = 6
			AND satellite_connections_open BETWEEN 1 AND 2 AND satellite_connections_in_use <= satellite_connections_open
			AND satellite_envelopes_waiting = 0`) == 1
	})
}
