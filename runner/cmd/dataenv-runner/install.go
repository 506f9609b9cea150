package main

import (
	"context"
	"flag"
	"fmt"
	"io"

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

// runInstallRequest serves ModeInstall: each block is one `[FORCE] INSTALL name [FROM
// community]` statement (extension.ParseInstall), built by the client and run outside any jail
// into a writable extension directory. Nothing else runs in this mode.
func runInstallRequest(ctx context.Context, req *protocol.Request, stderr io.Writer) int {
	resp := &protocol.Response{Results: []protocol.Result{}}
	if err := installBlocks(ctx, req); err != nil {
		resp.Error, resp.ErrorBlock = err.Error(), -1
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

func installBlocks(ctx context.Context, req *protocol.Request) error {
	stmts := make([]string, len(req.Blocks))
	for i, b := range req.Blocks {
		inst, ok := extension.ParseInstall(b)
		if !ok {
			return fmt.Errorf("install mode runs only [FORCE] INSTALL name [FROM community], not %q", b)
		}
		stmts[i] = inst.String()
	}
	in, err := engine.Open(ctx, req.ExtensionDirectory)
	if err != nil {
		return err
	}
	defer in.Close()
	for _, st := range stmts {
		if _, err := in.Conn.ExecContext(ctx, st); err != nil {
			return fmt.Errorf("%s: %w", st, err)
		}
	}
	return nil
}
