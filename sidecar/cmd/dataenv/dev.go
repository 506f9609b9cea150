package main

import (
	"context"
	"io"

	"github.com/dataenv/dataenv/sidecar/internal/app"
)

func runDev(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("dev", "Starts (or reuses) a local PostgreSQL cluster for --dir, installs dataenv in database \"dataenv\" and runs the sidecar in the foreground.\nCtrl-C stops the sidecar and the cluster it started; the data stays for next time. One instance runs per directory.")
	dir := fs.String("dir", ".dataenv", "directory of the instance: its cluster, object store and state")
	reset := fs.Bool("reset", false, "stop the instance's cluster and start from scratch (removes its data)")
	sc := sidecarFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := sc.config()
	if err != nil {
		return err
	}
	return app.Dev(ctx, app.DevConfig{Dir: *dir, Reset: *reset, Stdout: stdout,
		HTTPAddrExplicit: fs.isSet("http-addr"), Config: cfg})
}
