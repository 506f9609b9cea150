package main

import (
	"context"
	"io"

	"github.com/dataenv/dataenv/sidecar/internal/app"
)

func runDev(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("dev", "Starts (or reuses) a local PostgreSQL cluster under --dir, installs dataenv in database \"dataenv\" and runs the sidecar in the foreground. Ctrl-C stops the sidecar and the cluster; the data stays for next time.")
	dir := fs.String("dir", ".dataenv", "directory of the local cluster and object store")
	sc := sidecarFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := sc.config()
	if err != nil {
		return err
	}
	return app.Dev(ctx, app.DevConfig{Dir: *dir, Stdout: stdout, Config: cfg})
}
