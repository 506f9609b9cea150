package client

import (
	"context"
	"fmt"
	"strings"

	"github.com/dataenv/dataenv/runner/extension"
	"github.com/dataenv/dataenv/runner/protocol"
)

// installOutside installs, outside the jail and into the cache the jail mounts read-only, the
// extensions a job may load: the required ones and each `[FORCE] INSTALL name [FROM community]`
// block. Only INSTALL statements built here run unjailed, never the job's SQL. A FORCE INSTALL
// runs every time; a plain one only when the binary is missing.
func (c *Client) installOutside(ctx context.Context, blocks []string) error {
	var todo []string
	seen := map[string]bool{}
	add := func(i extension.Install) {
		if s := i.String(); !seen[s] && (i.Force || len(extension.Missing(c.cfg.ExtensionDir, i.Name)) > 0) {
			seen[s] = true
			todo = append(todo, s)
		}
	}
	for _, n := range extension.Required {
		add(extension.Install{Name: n})
	}
	for _, b := range blocks {
		if i, ok := extension.ParseInstall(b); ok {
			add(i)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	c.installMu.Lock()
	defer c.installMu.Unlock()
	p, err := c.spawn(IsolationPlain, false, nil)
	if err != nil {
		return err
	}
	defer p.cleanup()
	req := &protocol.Request{Mode: protocol.ModeInstall, Blocks: todo,
		ExtensionDirectory: c.cfg.ExtensionDir, ResultPath: p.work.resultInside()}
	sendErr := p.send(req)
	if _, err := p.finish(ctx, resultOverheadBytes); err != nil {
		if sendErr != nil {
			err = fmt.Errorf("%w (%v)", err, sendErr)
		}
		err = fmt.Errorf("install DuckDB extensions for the jailed runner (%s): %w",
			strings.Join(todo, "; "), err)
		if missing := extension.Check(c.cfg.ExtensionDir); missing != nil {
			err = fmt.Errorf("%w\n%w", missing, err)
		}
		return err
	}
	return nil
}

// unforce rewrites `FORCE INSTALL x` blocks into `INSTALL x`: the jail's cache is read-only and
// installOutside already honoured the FORCE. Same number of blocks, so results line up.
func unforce(blocks []string) []string {
	out := make([]string, len(blocks))
	for i, b := range blocks {
		out[i] = b
		if inst, ok := extension.ParseInstall(b); ok && inst.Force {
			inst.Force = false
			out[i] = inst.String()
		}
	}
	return out
}
