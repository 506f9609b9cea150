package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
)

// PGVersionEnv names the environment variable that chooses the PostgreSQL major version of the
// clusters testenv starts: empty for the machine's own (the newest /usr/lib/postgresql/N), or a
// major version such as 17 or 18. `make test` runs its matrix this way.
const PGVersionEnv = "DATAENV_TEST_PG_VERSION"

// PGRootsEnv names the environment variable pointing at the directory where tests/setup/pgroots.sh
// prepares the Debian roots (default: .deps/pg at the top of the repository).
const PGRootsEnv = "DATAENV_PG_ROOTS"

// PGServer says where the server of a PostgreSQL major version comes from: the machine's own
// binaries (BinDir) or a Debian root it runs chrooted in (Root, see localpg.Config.Root).
type PGServer struct {
	Major  int
	BinDir string // the machine's /usr/lib/postgresql/N/bin, or "" with Root
	Root   string // a root prepared by tests/setup/pgroots.sh, or ""
	// ToolDir holds pg_dump, pg_restore and psql of this version that run on this machine.
	ToolDir string
}

// RequestedPGVersion is the major version $DATAENV_TEST_PG_VERSION asks for (0: the machine's).
func RequestedPGVersion() (int, error) {
	s := strings.TrimSpace(os.Getenv(PGVersionEnv))
	if s == "" {
		return 0, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 15 {
		return 0, fmt.Errorf("testenv: %s=%q: want a PostgreSQL major version, 15 or newer", PGVersionEnv, s)
	}
	return v, nil
}

// PGRootVersionsEnv names the environment variable listing the versions tests/setup/pgroots.sh
// prepares roots for, and `make test` runs its matrix on ("17 18" when unset).
const PGRootVersionsEnv = "DATAENV_PG_ROOT_VERSIONS"

// PGMatrixVersions are the major versions of $DATAENV_PG_ROOT_VERSIONS ("17 18" when unset):
// those besides the machine's own that every test of several versions covers.
func PGMatrixVersions() ([]int, error) {
	s, ok := os.LookupEnv(PGRootVersionsEnv)
	if !ok {
		s = "17 18"
	}
	var out []int
	for _, f := range strings.Fields(s) {
		v, err := strconv.Atoi(f)
		if err != nil || v < 15 {
			return nil, fmt.Errorf("testenv: %s=%q: %q is not a PostgreSQL major version", PGRootVersionsEnv, s, f)
		}
		out = append(out, v)
	}
	return out, nil
}

// FindPGServer finds the server of major version v: the machine's /usr/lib/postgresql/v/bin,
// else the root tests/setup/pgroots.sh prepared. An error (never a skip) when there is neither:
// a test of a version it cannot get fails.
func FindPGServer(v int) (PGServer, error) {
	bin := fmt.Sprintf("/usr/lib/postgresql/%d/bin", v)
	if isExecutable(filepath.Join(bin, "postgres")) && isExecutable(filepath.Join(bin, "initdb")) {
		return PGServer{Major: v, BinDir: bin, ToolDir: bin}, nil
	}
	dir, err := PGRootsDir()
	if err != nil {
		return PGServer{}, err
	}
	d := filepath.Join(dir, strconv.Itoa(v))
	if _, err := os.Stat(filepath.Join(d, "ready")); err != nil {
		return PGServer{}, fmt.Errorf("testenv: PostgreSQL %d is neither installed on this machine "+
			"(%s) nor prepared as a root in %s (%v): run `make deps` (tests/setup/pgroots.sh; "+
			"DATAENV_PG_ROOT_VERSIONS must include %d)", v, bin, d, err, v)
	}
	return PGServer{Major: v, Root: filepath.Join(d, "root"), ToolDir: filepath.Join(d, "bin")}, nil
}

// PGToolDirs lists the directories of client tools (pg_dump, pg_restore, psql) that run on this
// machine beyond the ones on PATH: every prepared root's bin/, newest version first. Tests hand
// them to the sidecar (--pg-tools-dirs) so that it can copy databases of any version they start.
func PGToolDirs() []string {
	dir, err := PGRootsDir()
	if err != nil {
		return nil
	}
	readies, _ := filepath.Glob(filepath.Join(dir, "*", "ready"))
	var out []string
	for _, r := range readies {
		out = append(out, filepath.Join(filepath.Dir(r), "bin"))
	}
	sort.Slice(out, func(i, j int) bool { return versionDir(out[i]) > versionDir(out[j]) })
	return out
}

func versionDir(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// PGRootsDir is where tests/setup/pgroots.sh prepares the roots: $DATAENV_PG_ROOTS, else .deps/pg
// at the top of the repository.
func PGRootsDir() (string, error) {
	if d := os.Getenv(PGRootsEnv); d != "" {
		return d, nil
	}
	top, err := repoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(top, ".deps", "pg"), nil
}

// repoRoot is the directory of this module's go.mod: found from the working directory (go test
// runs in the package's directory), else from this source file's location.
func repoRoot() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	for _, d := range starts {
		for ; ; d = filepath.Dir(d) {
			if isModule(filepath.Join(d, "go.mod")) {
				return d, nil
			}
			if d == filepath.Dir(d) {
				break
			}
		}
	}
	return "", errors.New("testenv: cannot find the repository (the go.mod of " + modulePath +
		") from the working directory: set " + PGRootsEnv)
}

const modulePath = "github.com/dataenv/dataenv"

func isModule(goMod string) bool {
	f, err := os.Open(goMod)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, "module ") {
			return strings.TrimSpace(strings.TrimPrefix(line, "module ")) == modulePath
		}
	}
	return false
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}
