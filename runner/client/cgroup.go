package client

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// jobCgroup is the memory cgroup of one runner (v1 memory controller or v2), created under
// Config.CgroupParent at spawn and removed once the runner is gone. Its limit is set when the
// runner takes its job, so a warm spare gets the limit of the job it runs.
type jobCgroup struct {
	dir string
	v2  bool
}

// newJobCgroup creates a child cgroup of parent with no limit yet.
func newJobCgroup(parent string) (*jobCgroup, error) {
	v2 := false
	if _, err := os.Stat(filepath.Join(parent, "memory.limit_in_bytes")); err != nil {
		if _, err := os.Stat(filepath.Join(parent, "cgroup.controllers")); err != nil {
			return nil, fmt.Errorf("cgroup %s: neither a v1 memory cgroup nor a v2 cgroup", parent)
		}
		v2 = true
		// Children get the memory controller only when the parent hands it down.
		_ = os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+memory"), 0)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	dir := filepath.Join(parent, "dataenv-runner-"+hex.EncodeToString(b))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create the runner's cgroup: %w", err)
	}
	cg := &jobCgroup{dir: dir, v2: v2}
	if v2 {
		if _, err := os.Stat(filepath.Join(dir, "memory.max")); err != nil {
			cg.remove()
			return nil, fmt.Errorf("cgroup %s does not hand the memory controller to its children", parent)
		}
	}
	return cg, nil
}

// setLimit sets the memory limit in bytes (swap included where the kernel counts it).
func (cg *jobCgroup) setLimit(bytes int64) error {
	v := strconv.FormatInt(bytes, 10)
	if cg.v2 {
		_ = os.WriteFile(filepath.Join(cg.dir, "memory.swap.max"), []byte("0"), 0)
		return os.WriteFile(filepath.Join(cg.dir, "memory.max"), []byte(v), 0)
	}
	if err := os.WriteFile(filepath.Join(cg.dir, "memory.limit_in_bytes"), []byte(v), 0); err != nil {
		return err
	}
	// memsw exists only with swap accounting; it must not be below the memory limit.
	_ = os.WriteFile(filepath.Join(cg.dir, "memory.memsw.limit_in_bytes"), []byte(v), 0)
	return nil
}

// oomKills is the number of processes the kernel's OOM killer ended in the cgroup.
func (cg *jobCgroup) oomKills() int {
	name := "memory.oom_control"
	if cg.v2 {
		name = "memory.events"
	}
	f, err := os.Open(filepath.Join(cg.dir, name))
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), " "); ok && k == "oom_kill" {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// remove deletes the cgroup; the kernel may take a moment to let go of an emptied one.
func (cg *jobCgroup) remove() {
	for i := 0; i < 50; i++ {
		if err := os.Remove(cg.dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// OwnMemoryCgroup is the memory cgroup directory this process runs in when a child cgroup can be
// created there (root, or a delegated cgroup), else "" with the reason: where the machine allows
// it, runners get a memory cgroup of their own under it (Config.CgroupParent).
func OwnMemoryCgroup() (string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	var v1, v2 string
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			v1 = filepath.Join("/sys/fs/cgroup/memory", parts[2])
		case parts[0] == "0" && parts[1] == "":
			v2 = filepath.Join("/sys/fs/cgroup", parts[2])
		}
	}
	dir := v1
	if dir == "" {
		dir = v2
	}
	if dir == "" {
		return "", errors.New("no memory cgroup controller")
	}
	cg, err := newJobCgroup(dir)
	if err != nil {
		return "", err
	}
	cg.remove()
	return dir, nil
}

// sweepStaleCgroups removes the runner cgroups under parent that a sidecar killed before its
// cleanup left behind: empty ones (no process) created more than a minute ago, so that a cgroup
// another client just made for a runner that is about to join it is never taken away.
func sweepStaleCgroups(parent string) {
	dirs, _ := filepath.Glob(filepath.Join(parent, "dataenv-runner-*"))
	for _, d := range dirs {
		st, err := os.Stat(d)
		if err != nil || time.Since(st.ModTime()) < time.Minute {
			continue
		}
		if procs, err := os.ReadFile(filepath.Join(d, "cgroup.procs")); err == nil && len(strings.TrimSpace(string(procs))) == 0 {
			_ = os.Remove(d)
		}
	}
}
