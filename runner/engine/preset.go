package engine

import (
	"context"
	"fmt"
	"strings"
)

// presetSetting is a sandbox setting that is the same for every job and that a job without a
// sandbox can put back (RESET): a spare sets it before its job arrives (PresetSandbox), so that
// a job's sandbox is fewer statements (each costs DuckDB about a third of a millisecond).
// allow_community_extensions is not one: DuckDB lets it be turned off only once.
type presetSetting struct{ name, value string }

func (s presetSetting) set() string { return "SET " + s.name + " = " + s.value }

// presetSettings are the sandbox's presettable settings for an instance with or without httpfs
// loaded (s3_url_compatibility_mode is an httpfs setting).
func presetSettings(httpfs bool) []presetSetting {
	out := []presetSetting{
		{"autoinstall_known_extensions", "false"},
		{"allowed_configs", list(sandboxConfigs)},
	}
	if httpfs {
		out = append(out, presetSetting{"s3_url_compatibility_mode", "true"})
	}
	return out
}

// PresetSandbox sets the sandbox's settings that do not depend on the job ahead of it, in one
// call: what a spare does once DuckDB is open. A job with a sandbox then leaves them out of its
// own; a job without one resets them first.
func (in *Instance) PresetSandbox(ctx context.Context) error {
	settings := presetSettings(in.loaded["httpfs"])
	stmts := make([]string, len(settings))
	for i, s := range settings {
		stmts[i] = s.set()
	}
	if _, err := in.Conn.ExecContext(ctx, strings.Join(stmts, ";\n")); err != nil {
		return fmt.Errorf("sandbox settings ahead of the job: %w", err)
	}
	in.preset = map[string]bool{}
	for _, s := range settings {
		in.preset[s.name] = true
	}
	return nil
}

// unpreset resets what PresetSandbox set, for a job without a sandbox.
func (in *Instance) unpreset(ctx context.Context) error {
	if len(in.preset) == 0 {
		return nil
	}
	var stmts []string
	for name := range in.preset {
		stmts = append(stmts, "RESET "+name)
	}
	if _, err := in.Conn.ExecContext(ctx, strings.Join(stmts, ";\n")); err != nil {
		return fmt.Errorf("reset the sandbox settings set ahead of the job: %w", err)
	}
	in.preset = nil
	return nil
}
