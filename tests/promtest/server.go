// Package promtest runs a real Prometheus server (the binary from Debian's prometheus package) for
// tests: on a free 127.0.0.1 port, with its storage in a directory the caller owns, scraping the
// given targets every second and evaluating the given rule files. Queries go through the HTTP API.
package promtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/dataenv/dataenv/tests/testenv"
)

// Config describes the server to start.
type Config struct {
	// Binary is the prometheus executable; "prometheus" from PATH when empty.
	Binary string
	// Dir holds the configuration and the TSDB; required (a test's t.TempDir()).
	Dir string
	// Targets are host:port addresses scraped at /metrics under job "dataenv".
	Targets []string
	// RuleFiles are rule files loaded by the server (absolute or relative to the working dir).
	RuleFiles []string
	// ScrapeInterval is also the rule evaluation interval; 1s when zero.
	ScrapeInterval time.Duration
}

// Server is a running Prometheus.
type Server struct {
	URL    string // http://127.0.0.1:port
	cmd    *exec.Cmd
	stderr *testenv.LogBuffer
	exited chan struct{}
}

// Start writes the configuration, starts Prometheus and waits until it answers /-/ready.
// Prometheus lives until Stop or until ctx ends (then it gets SIGTERM, and SIGKILL 10 s later).
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Dir == "" {
		return nil, errors.New("promtest: Config.Dir is required")
	}
	if cfg.Binary == "" {
		cfg.Binary = "prometheus"
	}
	bin, err := exec.LookPath(cfg.Binary)
	if err != nil {
		return nil, fmt.Errorf("promtest: %w (install Debian's prometheus package: make deps)", err)
	}
	if cfg.ScrapeInterval <= 0 {
		cfg.ScrapeInterval = time.Second
	}
	confPath, err := writeConfig(cfg)
	if err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	s := &Server{URL: "http://" + addr, stderr: &testenv.LogBuffer{}, exited: make(chan struct{})}
	s.cmd = exec.CommandContext(ctx, bin,
		"--config.file="+confPath,
		"--storage.tsdb.path="+filepath.Join(cfg.Dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn",
	)
	s.cmd.Cancel = func() error { return s.cmd.Process.Signal(syscall.SIGTERM) }
	s.cmd.WaitDelay = 10 * time.Second
	s.cmd.Stdout = s.stderr
	s.cmd.Stderr = s.stderr
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("promtest: start %s: %w", bin, err)
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	if err := s.waitReady(ctx); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

func writeConfig(cfg Config) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "global:\n  scrape_interval: %s\n  evaluation_interval: %s\n", cfg.ScrapeInterval, cfg.ScrapeInterval)
	if len(cfg.RuleFiles) > 0 {
		b.WriteString("rule_files:\n")
		for _, f := range cfg.RuleFiles {
			abs, err := filepath.Abs(f)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "  - %q\n", abs)
		}
	}
	b.WriteString("scrape_configs:\n  - job_name: dataenv\n    static_configs:\n      - targets:\n")
	for _, t := range cfg.Targets {
		fmt.Fprintf(&b, "          - %q\n", t)
	}
	path := filepath.Join(cfg.Dir, "prometheus.yml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return "", fmt.Errorf("promtest: %w", err)
	}
	return path, nil
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("promtest: free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if resp, err := http.Get(s.URL + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.exited:
			return fmt.Errorf("promtest: prometheus exited during start-up: %s", s.stderr.String())
		case <-ctx.Done():
			return fmt.Errorf("promtest: prometheus not ready: %w; log: %s", ctx.Err(), s.stderr.String())
		case <-tick.C:
		}
	}
}

// Log returns what Prometheus wrote so far (for failure messages).
func (s *Server) Log() string { return s.stderr.String() }

// Stop terminates Prometheus (SIGTERM, then SIGKILL after 10 s) and waits for it to exit.
func (s *Server) Stop() error {
	if s == nil || s.cmd == nil || s.cmd.Process == nil {
		return nil
	}
	select {
	case <-s.exited:
		return nil
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		return nil
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
		return errors.New("promtest: prometheus ignored SIGTERM; killed")
	}
}
