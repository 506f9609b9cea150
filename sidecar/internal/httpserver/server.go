// Package httpserver serves the sidecar's operational endpoints: /metrics (Prometheus, from the
// sidecar's private registry), /healthz (the process is up) and /readyz (this sidecar is the leader
// or a standby ready to take over, and the installed schema matches the binary).
package httpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultAddr is the listen address when Config.Addr is empty (flag --http-addr, env
// DATAENV_HTTP_ADDR).
const DefaultAddr = "127.0.0.1:9750"

// DefaultShutdownTimeout bounds how long Stop waits for in-flight requests.
const DefaultShutdownTimeout = 5 * time.Second

// Config configures a Server. Only Gatherer is required in practice; the rest have defaults.
type Config struct {
	// Addr is the host:port to listen on; DefaultAddr when empty. Port 0 picks a free port
	// (see Server.Addr).
	Addr string
	// Gatherer is served on /metrics, normally the registry from metrics.NewRegistry(). When nil,
	// /metrics serves an empty registry.
	Gatherer prometheus.Gatherer
	// Ready answers /readyz. When nil, /readyz reports not ready.
	Ready ReadinessFunc
	// Logger receives start, stop and serve errors; slog.Default() when nil.
	Logger *slog.Logger
	// ShutdownTimeout bounds Stop; DefaultShutdownTimeout when zero.
	ShutdownTimeout time.Duration
	// Listener, when set, is served instead of listening on Addr (a caller that had to bind
	// before it could report the address, as dataenv dev does).
	Listener net.Listener
}

// Server is the HTTP listener. Start it once; Stop is idempotent and also runs when the context
// given to Start is cancelled.
type Server struct {
	cfg      Config
	log      *slog.Logger
	srv      *http.Server
	listener net.Listener
	done     chan struct{}
	stopOnce sync.Once
}

// New returns a server with cfg's defaults filled in; nothing listens until Start.
func New(cfg Config) *Server {
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	if cfg.Gatherer == nil {
		cfg.Gatherer = prometheus.NewRegistry()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With("component", "httpserver"), done: make(chan struct{})}
	s.srv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	return s
}

// Handler returns the mux of the three endpoints (also usable with httptest).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.cfg.Gatherer, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(s.log.Handler(), slog.LevelError),
		ErrorHandling: promhttp.ContinueOnError,
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeText(w, http.StatusOK, "ok")
	})
	mux.Handle("GET /readyz", readyHandler(s.cfg.Ready))
	return mux
}

// Start binds the listener (so an address in use fails here) and serves in the background until
// Stop or until ctx is cancelled.
func (s *Server) Start(ctx context.Context) error {
	ln := s.cfg.Listener
	if ln == nil {
		var lc net.ListenConfig
		var err error
		if ln, err = lc.Listen(ctx, "tcp", s.cfg.Addr); err != nil {
			return fmt.Errorf("http listener on %s: %w", s.cfg.Addr, err)
		}
	}
	s.listener = ln
	s.log.Info("http listener started", "addr", ln.Addr().String())
	go s.serve()
	go func() {
		select {
		case <-ctx.Done():
			s.Stop()
		case <-s.done:
		}
	}()
	return nil
}

func (s *Server) serve() {
	defer close(s.done)
	if err := s.srv.Serve(s.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
		s.log.Error("http listener failed", "err", err)
	}
}

// Addr returns the bound address after Start (useful with port 0), else the configured one.
func (s *Server) Addr() string {
	if s.listener != nil {
		return s.listener.Addr().String()
	}
	return s.cfg.Addr
}

// Stop shuts the server down gracefully, waiting at most ShutdownTimeout, and waits for the serve
// goroutine to end. Safe to call more than once and before Start.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		if s.listener == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
		defer cancel()
		if err := s.srv.Shutdown(ctx); err != nil {
			s.log.Warn("http listener shutdown", "err", err)
			_ = s.srv.Close()
		}
		<-s.done
		s.log.Info("http listener stopped")
	})
}

func writeText(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = fmt.Fprintln(w, body)
}
