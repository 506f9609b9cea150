// Package pgtool finds the PostgreSQL client tools a database copy runs (pg_dump, pg_restore,
// psql) for a given server. pg_dump refuses to dump a server newer than itself ("server version
// mismatch"), so every cluster needs tools at least as new as its server; of those, the oldest
// set is taken (its output restores into the server it came from without newer syntax).
//
// Candidates, in this order: the directories the sidecar is configured with (--pg-tools-dirs),
// every /usr/lib/postgresql/N/bin (Debian and Ubuntu install each client version there), and the
// directory of pg_dump on PATH. A directory counts when it holds all three tools; its version is
// what `pg_dump --version` prints, asked once per directory.
//
//	f := pgtool.NewFinder(dirs)
//	set, err := f.For(ctx, "18.1 (Debian 18.1-1)")   // server_version of the cluster
//	cmd := exec.CommandContext(ctx, set.Path(pgtool.PgDump), ...)
package pgtool

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
	"sync"
	"time"
)

// The tools a copy runs.
const (
	PgDump    = "pg_dump"
	PgRestore = "pg_restore"
	Psql      = "psql"
)

var tools = []string{PgDump, PgRestore, Psql}

// Set is a directory holding pg_dump, pg_restore and psql of one version.
type Set struct {
	Dir     string
	Major   int
	Version string // as pg_dump --version prints it, e.g. "18.1"
}

// Path is the path of tool in the set.
func (s Set) Path(tool string) string { return filepath.Join(s.Dir, tool) }

// Finder finds tool sets; it is safe for concurrent use and remembers each directory's version.
type Finder struct {
	dirs []string

	mu       sync.Mutex
	versions map[string]Set // by directory, sets that answered
}

// NewFinder returns a Finder that looks in dirs first (see the package documentation).
func NewFinder(dirs []string) *Finder {
	return &Finder{dirs: dirs, versions: map[string]Set{}}
}

// For returns the oldest tool set at least as new as the server whose server_version is
// serverVersion, or an error naming the server's version and the newest tools found.
func (f *Finder) For(ctx context.Context, serverVersion string) (Set, error) {
	major, err := Major(serverVersion)
	if err != nil {
		return Set{}, err
	}
	sets := f.Sets(ctx)
	for _, s := range sets {
		if s.Major >= major {
			return s, nil
		}
	}
	if len(sets) == 0 {
		return Set{}, fmt.Errorf("no PostgreSQL client tools (pg_dump, pg_restore and psql in one directory) were found "+
			"for a server running PostgreSQL %s: install the PostgreSQL %d client tools (Debian: postgresql-client-%d) "+
			"or name their directory in --pg-tools-dirs (DATAENV_PG_TOOLS_DIRS)", serverVersion, major, major)
	}
	newest := sets[len(sets)-1]
	return Set{}, fmt.Errorf("the server runs PostgreSQL %s and the newest pg_dump found is %s (%s): pg_dump "+
		"refuses servers newer than itself; install the PostgreSQL %d client tools (Debian: postgresql-client-%d) "+
		"or name their directory in --pg-tools-dirs (DATAENV_PG_TOOLS_DIRS)",
		serverVersion, newest.Version, newest.Dir, major, major)
}

// Sets lists the usable tool sets, oldest major version first (candidates of one version in
// the order they were found).
func (f *Finder) Sets(ctx context.Context) []Set {
	var out []Set
	seen := map[string]bool{}
	for _, dir := range f.candidates() {
		if seen[dir] {
			continue
		}
		seen[dir] = true
		if s, ok := f.inspect(ctx, dir); ok {
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Major < out[j].Major })
	return out
}

func (f *Finder) candidates() []string {
	cands := append([]string(nil), f.dirs...)
	debian, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	cands = append(cands, debian...)
	if p, err := exec.LookPath(PgDump); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		cands = append(cands, filepath.Dir(p))
	}
	return cands
}

// inspect asks dir's pg_dump for its version (once; a failure is asked again next time).
func (f *Finder) inspect(ctx context.Context, dir string) (Set, bool) {
	f.mu.Lock()
	s, ok := f.versions[dir]
	f.mu.Unlock()
	if ok {
		return s, true
	}
	for _, t := range tools {
		if st, err := os.Stat(filepath.Join(dir, t)); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return Set{}, false
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(dir, PgDump), "--version").Output()
	if err != nil {
		return Set{}, false
	}
	m := toolVersionRE.FindStringSubmatch(string(out))
	if m == nil {
		return Set{}, false
	}
	major, _ := strconv.Atoi(m[2])
	s = Set{Dir: dir, Major: major, Version: m[1]}
	f.mu.Lock()
	f.versions[dir] = s
	f.mu.Unlock()
	return s, true
}

var toolVersionRE = regexp.MustCompile(`\(PostgreSQL\)\s+((\d+)[.\w]*)`)

// Major is the major version of a server_version ("18.1 (Debian 18.1-1)", "17beta2", "9.6.24").
func Major(serverVersion string) (int, error) {
	v := strings.TrimSpace(serverVersion)
	end := strings.IndexFunc(v, func(r rune) bool { return r < '0' || r > '9' })
	if end == 0 {
		return 0, fmt.Errorf("cannot read a PostgreSQL version from server_version %q", serverVersion)
	}
	if end < 0 {
		end = len(v)
	}
	return strconv.Atoi(v[:end])
}
