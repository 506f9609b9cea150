package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/dataenv/dataenv/runner/engine"
	"github.com/dataenv/dataenv/runner/extension"
	"github.com/dataenv/dataenv/runner/protocol"
)

type sqlFlags []string

func (s *sqlFlags) String() string     { return fmt.Sprint(*s) }
func (s *sqlFlags) Set(v string) error { *s = append(*s, v); return nil }

// runManual runs SQL given on the command line and prints the response: a debugging aid.
func runManual(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var blocks sqlFlags
	fs.Var(&blocks, "sql", "SQL block (repeatable)")
	dir := fs.String("extension-dir", "", "DuckDB extension_directory")
	mem := fs.String("memory-limit", "", "DuckDB memory_limit")
	maxBytes := fs.Int64("max-result-bytes", 0, "bound on the rows' JSON")
	last := fs.Bool("last-only", false, "keep only the last block's rows")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if len(blocks) == 0 {
		fmt.Fprintln(stderr, "dataenv-runner run: give at least one --sql")
		return 2
	}
	if *dir == "" {
		*dir, _ = extension.Dir()
	}
	tmp, err := os.MkdirTemp("", "dataenv-runner-*")
	if err != nil {
		fmt.Fprintf(stderr, "dataenv-runner: %v\n", err)
		return 2
	}
	defer os.RemoveAll(tmp)
	req := &protocol.Request{
		Mode: protocol.ModeRun, Blocks: blocks, ExtensionDirectory: *dir, MemoryLimit: *mem,
		MaxResultBytes: *maxBytes, CollectLastOnly: *last,
		TempDirectory: filepath.Join(tmp, "spill"), ResultPath: filepath.Join(tmp, "result.json"),
	}
	resp := engine.Run(context.Background(), req, nil)
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(resp); err != nil {
		return 2
	}
	if resp.Error != "" {
		return 1
	}
	return 0
}
