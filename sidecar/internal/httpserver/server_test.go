package httpserver_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dataenv/dataenv/sidecar/internal/httpserver"
	"github.com/dataenv/dataenv/sidecar/internal/metrics"
)

func TestReadyz(t *testing.T) {
	cases := []struct {
		name     string
		ready    httpserver.ReadinessFunc
		wantCode int
		wantBody string
	}{
		{"leader", fixed(httpserver.Readiness{Leader: true, SchemaVersion: "3", WantSchemaVersion: "3"}),
			200, "ready: leader, schema version 3"},
		{"standby", fixed(httpserver.Readiness{StandbyReady: true, SchemaVersion: "3", WantSchemaVersion: "3"}),
			200, "ready: standby"},
		{"neither", fixed(httpserver.Readiness{SchemaVersion: "3", WantSchemaVersion: "3", Detail: "replication connecting"}),
			503, "not the leader and not a ready standby (replication connecting)"},
		{"schema mismatch", fixed(httpserver.Readiness{Leader: true, SchemaVersion: "2", WantSchemaVersion: "3"}),
			503, `schema version "2" installed, this binary needs "3"`},
		{"check error", func(context.Context) (httpserver.Readiness, error) {
			return httpserver.Readiness{}, errors.New("control database unreachable")
		}, 503, "readiness check failed: control database unreachable"},
		{"no check", nil, 503, "no readiness check configured"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httpserver.New(httpserver.Config{Ready: tc.ready, Logger: quietLogger()})
			ts := httptest.NewServer(srv.Handler())
			defer ts.Close()
			code, body := get(t, ts.URL+"/readyz")
			if code != tc.wantCode || !strings.Contains(body, tc.wantBody) {
				t.Fatalf("got %d %q, want %d containing %q", code, body, tc.wantCode, tc.wantBody)
			}
		})
	}
}

func TestRealListenerServesMetricsAndHealth(t *testing.T) {
	reg := metrics.NewRegistry()
	m := metrics.New(reg)
	m.RequestFinished("ping", metrics.OutcomeSucceeded, time.Millisecond, time.Millisecond)
	m.SetLeader(true)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := httpserver.New(httpserver.Config{Addr: "127.0.0.1:0", Gatherer: reg, Logger: quietLogger()})
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	base := "http://" + srv.Addr()

	if code, body := get(t, base+"/healthz"); code != 200 || strings.TrimSpace(body) != "ok" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	code, body := get(t, base+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{
		`dataenv_requests_total{kind="ping",outcome="succeeded"} 1`,
		"dataenv_leader 1",
		"go_goroutines",
		"process_cpu_seconds_total",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if code, _ := get(t, base+"/nope"); code != http.StatusNotFound {
		t.Errorf("/nope: %d, want 404", code)
	}
}

func TestStartFailsOnAddressInUseAndStopIsIdempotent(t *testing.T) {
	ctx := context.Background()
	first := httpserver.New(httpserver.Config{Addr: "127.0.0.1:0", Logger: quietLogger()})
	if err := first.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer first.Stop()
	second := httpserver.New(httpserver.Config{Addr: first.Addr(), Logger: quietLogger()})
	if err := second.Start(ctx); err == nil {
		second.Stop()
		t.Fatal("second listener on the same address started")
	}
	second.Stop()
	first.Stop()
	first.Stop()
}

func TestContextCancelStopsServer(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	srv := httpserver.New(httpserver.Config{Addr: "127.0.0.1:0", Logger: quietLogger()})
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr()
	cancel()
	srv.Stop() // waits for the shutdown the cancellation started
	if _, err := http.Get("http://" + addr + "/healthz"); err == nil {
		t.Fatal("server still answers after its context was cancelled")
	}
}

func TestDefaultAddr(t *testing.T) {
	if got := httpserver.New(httpserver.Config{}).Addr(); got != "127.0.0.1:9750" {
		t.Fatalf("default addr %q", got)
	}
}

func fixed(r httpserver.Readiness) httpserver.ReadinessFunc {
	return func(context.Context) (httpserver.Readiness, error) { return r, nil }
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
