package localpg

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// BinDir returns the directory holding initdb, pg_ctl and postgres, and the server's major
// version. explicit (if not empty) wins, then $DATAENV_PG_BINDIR, then the newest
// /usr/lib/postgresql/N/bin, then the directory of initdb on PATH.
func BinDir(ctx context.Context, explicit string) (dir string, major int, err error) {
	for _, cand := range binDirCandidates(explicit) {
		if !isFile(filepath.Join(cand, "initdb")) || !isFile(filepath.Join(cand, "postgres")) {
			continue
		}
		major, err := serverMajor(ctx, cand)
		if err != nil {
			return "", 0, err
		}
		if major < MinMajorVersion {
			return "", 0, fmt.Errorf("localpg: PostgreSQL %d in %s is too old: need %d or newer "+
				"(run tests/setup/deps.sh)", major, cand, MinMajorVersion)
		}
		return cand, major, nil
	}
	return "", 0, fmt.Errorf("localpg: no PostgreSQL server binaries found (initdb, postgres) in " +
		"$DATAENV_PG_BINDIR, /usr/lib/postgresql/*/bin or PATH; install them with tests/setup/deps.sh " +
		"(Debian packages postgresql and postgresql-client)")
}

// binDir is BinDir for the machine's own binaries, and its counterpart inside a root: explicit
// (a path inside the root) or the newest /usr/lib/postgresql/N/bin of the root. The directory
// returned is the one the server sees.
func (r *runAs) binDir(ctx context.Context, explicit string) (string, int, error) {
	if r.root == "" {
		return BinDir(ctx, explicit)
	}
	cands := []string{explicit}
	if explicit == "" {
		dirs, _ := filepath.Glob(filepath.Join(r.root, "usr/lib/postgresql/*/bin"))
		sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
		cands = cands[:0]
		for _, d := range dirs {
			cands = append(cands, r.inner(d))
		}
	}
	for _, cand := range cands {
		if !isFile(r.outer(filepath.Join(cand, "initdb"))) || !isFile(r.outer(filepath.Join(cand, "postgres"))) {
			continue
		}
		major, err := versionFrom(r.command(ctx, r.root, filepath.Join(cand, "postgres"), "--version"))
		if err != nil {
			return "", 0, fmt.Errorf("localpg: %s in the root %s: %w", cand, r.root, err)
		}
		if major < MinMajorVersion {
			return "", 0, fmt.Errorf("localpg: PostgreSQL %d in the root %s is too old: need %d "+
				"or newer", major, r.root, MinMajorVersion)
		}
		return cand, major, nil
	}
	return "", 0, fmt.Errorf("localpg: no PostgreSQL server binaries (initdb, postgres) in the "+
		"root %s under /usr/lib/postgresql/*/bin (tests/setup/deps.sh prepares such roots)", r.root)
}

func binDirCandidates(explicit string) []string {
	if explicit != "" {
		return []string{explicit}
	}
	if env := os.Getenv("DATAENV_PG_BINDIR"); env != "" {
		return []string{env}
	}
	var cands []string
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	cands = append(cands, dirs...)
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		cands = append(cands, filepath.Dir(p))
	}
	return cands
}

// versionOf parses N out of /usr/lib/postgresql/N/bin.
func versionOf(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

var versionRE = regexp.MustCompile(`\(PostgreSQL\)\s+(\d+)`)

func serverMajor(ctx context.Context, binDir string) (int, error) {
	major, err := versionFrom(exec.CommandContext(ctx, filepath.Join(binDir, "postgres"), "--version"))
	if err != nil {
		return 0, fmt.Errorf("localpg: %s: %w", binDir, err)
	}
	return major, nil
}

// versionFrom runs a `postgres --version` command and parses the major version it prints.
func versionFrom(cmd *exec.Cmd) (int, error) {
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		return 0, fmt.Errorf("postgres --version: %w %s", err, strings.TrimSpace(string(stderr)))
	}
	m := versionRE.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("cannot parse %q from postgres --version", strings.TrimSpace(string(out)))
	}
	return strconv.Atoi(string(m[1]))
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}
