package client

import (
	"fmt"
	"os"
	"path/filepath"
)

// Paths inside a jail, all under jailRoot: a job's local lake is bound at its own host path, and
// a lake kept under /work or /opt (a repository's checkout, an install directory) must not
// collide with the jail's own directories.
const (
	jailRoot      = "/.dataenv-jail"
	jailWork      = jailRoot + "/work"
	jailRunner    = jailRoot + "/dataenv-runner"
	jailExtension = jailRoot + "/extensions"
)

// workDir is a job's private directory: the only place its runner writes. DuckDB spills into
// spill/, /tmp of a jail is tmp/, the result is result.json.
type workDir struct {
	host string
	// inside is the same directory as the runner sees it.
	inside string
}

func newWorkDir(root string, jailed bool) (*workDir, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("create the runner work root: %w", err)
	}
	dir, err := os.MkdirTemp(root, "job-")
	if err != nil {
		return nil, fmt.Errorf("create a runner work directory: %w", err)
	}
	for _, sub := range []string{"spill", "tmp"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o700); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("create a runner work directory: %w", err)
		}
	}
	w := &workDir{host: dir, inside: dir}
	if jailed {
		w.inside = jailWork
	}
	return w, nil
}

func (w *workDir) resultHost() string   { return filepath.Join(w.host, "result.json") }
func (w *workDir) resultInside() string { return filepath.Join(w.inside, "result.json") }
func (w *workDir) spillInside() string  { return filepath.Join(w.inside, "spill") }
func (w *workDir) tmpInside() string    { return filepath.Join(w.inside, "tmp") }
func (w *workDir) remove() error        { return os.RemoveAll(w.host) }
