package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/install"
	"github.com/dataenv/dataenv/sidecar/localpg"
)

// DevConfig configures a local development instance.
type DevConfig struct {
	Dir    string // holds the instance: dev.lock, dev.json, the cluster (pg/, unless relocated)
	Reset  bool   // stop the instance's cluster and start from scratch
	Stdout io.Writer
	// HTTPAddrExplicit: the address was chosen (flag or environment), so a busy port is an
	// error; otherwise dev falls back to a free port.
	HTTPAddrExplicit bool
	Config           // the sidecar's; DSN is set to the local cluster's database "dataenv"
}

// devInfo is what a running instance writes to <dir>/dev.json, for a second one to report.
type devInfo struct {
	PID      int    `json:"pid"`
	DSN      string `json:"dsn"`
	HTTPAddr string `json:"http_addr"`
	PGDir    string `json:"pg_dir"`
}

// Dev starts (or reuses) a local PostgreSQL cluster for cfg.Dir, installs dataenv in its database
// "dataenv" and runs the sidecar until ctx ends. One instance runs per directory; it stops the
// cluster on the way out only if it started it.
func Dev(ctx context.Context, cfg DevConfig) error {
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	unlock, err := lockDevDir(dir)
	if err != nil {
		return err
	}
	defer unlock()
	if cfg.Reset {
		if err := resetDev(ctx, dir, cfg); err != nil {
			return err
		}
	}
	ln, err := devListener(cfg)
	if err != nil {
		return err
	}
	if ln != nil {
		defer ln.Close()
	}
	pgDir, err := devClusterDir(dir)
	if err != nil {
		return err
	}
	pg, err := localpg.Start(ctx, localpg.Config{Dir: pgDir, Name: "dev", Persistent: true, Logger: cfg.Logger})
	if err != nil {
		return fmt.Errorf("start local PostgreSQL: %w", err)
	}
	if !pg.Attached() {
		defer pg.Stop(context.WithoutCancel(ctx))
	}
	dsn, err := devDatabase(ctx, pg)
	if err != nil {
		return err
	}
	info := devInfo{PID: os.Getpid(), DSN: dsn, HTTPAddr: cfg.HTTPAddr, PGDir: pgDir}
	if ln != nil {
		info.HTTPAddr = ln.Addr().String()
	}
	if err := writeDevInfo(dir, info); err != nil {
		return err
	}
	defer os.Remove(filepath.Join(dir, "dev.json"))
	printDevBanner(cfg.Stdout, info, dir)
	cfg.Config.DSN, cfg.Config.HTTPListener = dsn, ln
	return Run(ctx, cfg.Config)
}

// lockDevDir takes <dir>/dev.lock for this process (released when it exits, however it exits).
// A second instance on the same directory is told where the first one runs.
func lockDevDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, "dev.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", filepath.Join(dir, "dev.lock"), err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock %s: %w", dir, err)
		}
		return nil, alreadyRunning(dir)
	}
	return func() { f.Close() }, nil
}

func alreadyRunning(dir string) error {
	var info devInfo
	b, err := os.ReadFile(filepath.Join(dir, "dev.json"))
	if err != nil || json.Unmarshal(b, &info) != nil {
		return fmt.Errorf("dataenv dev already runs for %s (it is starting up): stop it first, or use another --dir", dir)
	}
	return fmt.Errorf("dataenv dev already runs for %s (pid %d): connect with psql '%s', metrics on http://%s; "+
		"stop it with Ctrl-C in its terminal (or kill %d), or use another --dir", dir, info.PID, info.DSN, info.HTTPAddr, info.PID)
}

// devClusterDir is where the instance's cluster lives: <dir>/pg, unless the user postgres runs
// as (root runs it as postgres) cannot reach it, as under a 0700 home directory. Then it is
// /var/lib/dataenv/dev/<hash of dir>/pg, and <dir>/pg-location says so.
func devClusterDir(dir string) (string, error) {
	loc := filepath.Join(dir, "pg-location")
	if b, err := os.ReadFile(loc); err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	pgDir := filepath.Join(dir, "pg")
	if localpg.Reachable(pgDir) == nil {
		return pgDir, nil
	}
	sum := sha256.Sum256([]byte(dir))
	pgDir = filepath.Join("/var/lib/dataenv/dev", hex.EncodeToString(sum[:4]), "pg")
	if err := localpg.Reachable(pgDir); err != nil {
		return "", fmt.Errorf("neither %s nor %s can hold the local cluster: %w", filepath.Join(dir, "pg"), pgDir, err)
	}
	if err := os.WriteFile(loc, []byte(pgDir+"\n"), 0o644); err != nil {
		return "", err
	}
	return pgDir, nil
}

// resetDev stops the instance's cluster if it runs and removes everything the instance made.
func resetDev(ctx context.Context, dir string, cfg DevConfig) error {
	pgDir, err := devClusterDir(dir)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(pgDir, "data", "PG_VERSION")); err == nil {
		pg, err := localpg.Start(ctx, localpg.Config{Dir: pgDir, Name: "dev", Persistent: true, Logger: cfg.Logger})
		if err != nil {
			return fmt.Errorf("reset: start the old cluster to stop it: %w", err)
		}
		if err := pg.Stop(ctx); err != nil {
			return fmt.Errorf("reset: stop the old cluster: %w", err)
		}
	}
	for _, p := range []string{pgDir, filepath.Join(dir, "lake"), filepath.Join(dir, "pg-location")} {
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("reset: %w", err)
		}
	}
	fmt.Fprintf(cfg.Stdout, "dataenv dev: reset %s\n", dir)
	return nil
}

// devListener binds the HTTP listener before dev says it runs. The default address falls back
// to a free port when it is taken; an address the user chose must be free.
func devListener(cfg DevConfig) (net.Listener, error) {
	addr := cfg.HTTPAddr
	if addr == "-" {
		return nil, nil
	}
	if addr == "" {
		addr = "127.0.0.1:9750"
	}
	ln, err := net.Listen("tcp", addr)
	if err == nil || cfg.HTTPAddrExplicit {
		if err != nil {
			return nil, fmt.Errorf("listen on %s for /metrics: %w (choose another with --http-addr, or --http-addr - to disable it)", addr, err)
		}
		return ln, nil
	}
	ln, err2 := net.Listen("tcp", "127.0.0.1:0")
	if err2 != nil {
		return nil, fmt.Errorf("listen on %s for /metrics: %w; and on a free port: %v", addr, err, err2)
	}
	cfg.Logger.Warn("the default metrics address is taken; listening on a free port instead", "taken", addr, "addr", ln.Addr().String())
	return ln, nil
}

func writeDevInfo(dir string, info devInfo) error {
	b, _ := json.MarshalIndent(info, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "dev.json"), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(dir, "dev.json"), err)
	}
	return nil
}

func printDevBanner(w io.Writer, info devInfo, dir string) {
	fmt.Fprintf(w, "\ndataenv is running. Connect with:\n\n  psql '%s'\n\n", info.DSN)
	fmt.Fprintf(w, "Then try:\n\n  SELECT dataenv.ping() AS id \\gset\n  SELECT status, error, result FROM dataenv.wait(:'id');\n\n")
	if info.HTTPAddr != "-" {
		fmt.Fprintf(w, "Metrics: http://%s/metrics   ", info.HTTPAddr)
	}
	fmt.Fprintf(w, "Stop: Ctrl-C\n")
	if info.PGDir != filepath.Join(dir, "pg") {
		fmt.Fprintf(w, "The local cluster lives in %s (postgres cannot reach %s).\n", info.PGDir, dir)
	}
	fmt.Fprintln(w)
}

// devDatabase creates database "dataenv" when missing and installs dataenv in it.
func devDatabase(ctx context.Context, pg *localpg.Cluster) (string, error) {
	conn, err := pgx.Connect(ctx, pg.DSN("postgres"))
	if err != nil {
		return "", fmt.Errorf("connect to local PostgreSQL: %w", err)
	}
	var exists bool
	_ = conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_database WHERE datname = 'dataenv')`).Scan(&exists)
	if !exists {
		if _, err := conn.Exec(ctx, `CREATE DATABASE dataenv`); err != nil {
			conn.Close(ctx)
			return "", fmt.Errorf("create database dataenv: %w", err)
		}
	}
	conn.Close(ctx)
	dsn := pg.DSN("dataenv")
	ic, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", err
	}
	defer ic.Close(ctx)
	if _, err := install.Install(ctx, ic, install.Options{}); err != nil {
		return "", fmt.Errorf("install dataenv: %w", err)
	}
	return dsn, nil
}
