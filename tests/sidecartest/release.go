package sidecartest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// BuildRelease builds the dataenv binary of an earlier revision of this repository (a tag or a
// commit in the clone's history) the way a user who installed that release has it: without the
// test hooks. The revision's tree is exported with git archive (the working tree is not touched)
// under the git-ignored .deps/release/<rev>, and a binary built there before is reused.
func BuildRelease(rev string) (string, error) {
	root := repoRoot()
	dir := filepath.Join(root, ".deps", "release", rev)
	bin := filepath.Join(dir, "dataenv")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if out, err := exec.Command("git", "-C", root, "cat-file", "-e", rev+"^{commit}").CombinedOutput(); err != nil {
		return "", fmt.Errorf("release %s is not in this clone's history (a shallow clone? git fetch --unshallow): %v %s", rev, err, out)
	}
	src := filepath.Join(dir, "src")
	if err := os.RemoveAll(src); err != nil {
		return "", err
	}
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	archive := fmt.Sprintf("git -C %q archive %q | tar -x -C %q", root, rev, src)
	if out, err := exec.Command("bash", "-o", "pipefail", "-c", archive).CombinedOutput(); err != nil {
		return "", fmt.Errorf("export release %s: %v %s", rev, err, out)
	}
	tmp := bin + ".tmp"
	cmd := exec.Command("go", "build", "-o", tmp, "./sidecar/cmd/dataenv")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build release %s: %v\n%s", rev, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	return bin, os.RemoveAll(src)
}
