package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/dataenv/dataenv/runner/engine"
	"github.com/dataenv/dataenv/runner/extension"
	"github.com/dataenv/dataenv/runner/protocol"
)

func runInstall(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("install", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("extension-dir", "", "DuckDB extension_directory")
	force := fs.Bool("force", false, "FORCE INSTALL")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dir == "" {
		d, err := extension.Dir()
		if err != nil {
			fmt.Fprintf(stderr, "dataenv-runner: %v\n", err)
			return 2
		}
		*dir = d
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "dataenv-runner install: name at least one extension")
		return 2
	}
	if err := engine.Install(context.Background(), *dir, *force, fs.Args()...); err != nil {
		fmt.Fprintf(stderr, "dataenv-runner install: %v\n", err)
		return 1
	}
	return 0
}

// runInstallRequest serves ModeInstall: blocks are "INSTALL name" or "FORCE INSTALL name",
// built by the client, run outside any jail into a writable extension directory.
func runInstallRequest(ctx context.Context, req *protocol.Request, stderr io.Writer) int {
	resp := &protocol.Response{Results: []protocol.Result{}}
	for i, b := range req.Blocks {
		f := strings.Fields(strings.TrimSuffix(strings.TrimSpace(b), ";"))
		force := len(f) == 3 && strings.EqualFold(f[0], "FORCE")
		if force {
			f = f[1:]
		}
		if len(f) != 2 || !strings.EqualFold(f[0], "INSTALL") {
			resp.Error, resp.ErrorBlock = fmt.Sprintf("install mode runs only [FORCE] INSTALL name, not %q", b), i
			break
		}
		if err := engine.Install(ctx, req.ExtensionDirectory, force, f[1]); err != nil {
			resp.Error, resp.ErrorBlock = err.Error(), i
			break
		}
	}
	if err := writeResponse(req.ResultPath, resp); err != nil {
		fmt.Fprintf(stderr, "dataenv-runner: %v\n", err)
		return 2
	}
	if resp.Error != "" {
		return 1
	}
	return 0
}
