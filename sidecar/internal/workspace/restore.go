package workspace

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
	"github.com/dataenv/dataenv/sidecar/internal/pgtool"
)

// restoreJob is one dump and restore: the parent (src, as the cluster's admin) into an empty
// database (dst, as the role that is to own what is restored: never the admin, because the
// restore runs code the parent's owners wrote, CHECK constraints and generated columns while
// rows load, and such code could RESET ROLE to whoever connected).
type restoreJob struct {
	schemaOnly bool
	tools      pgtool.Set // at least as new as the cluster's server
	src, dst   *cluster.Libpq
	dstDB      string
	// excludeData are pg_dump patterns of tables whose rows are left out.
	excludeData []string
	// leaveOut are the objects the restoring role may not create: left out of the restore
	// (with their comments and publication memberships) and reported.
	leaveOut []uncreatable
	progress func(p loadProgress)
	every    time.Duration
	// waiting, if set, is told instead of progress what the load waits for while it stalls on a
	// lock of the parent (watch: a lockWatch of the parent).
	waiting func(what string)
	watch   *lockWatch
	// started is the dump, started beforehand (startDump); nil: restore starts it.
	started *pipeline
}

// restore copies the parent into the empty database:
//
//	pg_dump --format=custom --no-owner --no-acl [--schema-only] [--exclude-table-data ...]
//	  | pg_restore --list (only when objects must be left out: the archive's table of contents)
//	  | pg_restore --no-owner --no-acl --single-transaction --exit-on-error [--use-list]
//
// Owners and privileges are not restored by the tools: the restoring role owns everything, and
// the privileges are set afterwards from the parent's catalogs with the owners mapped (finish).
// The restore is one transaction: the copy is complete or empty. It returns what it left out.
// The dump is j.started, started beforehand by startDump, or started now.
func (s *Service) restore(ctx context.Context, j restoreJob) ([]notCarried, error) {
	p := j.started
	if p == nil {
		var err error
		if p, err = startDump(ctx, j); err != nil {
			return nil, err
		}
	}
	p.consumed = true
	return p.run(ctx, s, j, j.tools.Path(pgtool.PgRestore))
}

// startDump starts pg_dump of the parent (j.src) for j, its output in a pipe that the restore
// reads. Started while the copy's database is created, it reads the parent's catalogs
// meanwhile (on a small parent, most of what the dump costs) and then waits on the full pipe.
// The caller hands it to restore (restoreJob.started) or stops it.
func startDump(ctx context.Context, j restoreJob) (*pipeline, error) {
	args := []string{"--format=custom", "--compress=0", "--no-owner", "--no-acl", "--no-subscriptions",
		"--no-security-labels", "--no-password"}
	if j.schemaOnly {
		// Large objects are data: a schema-only dump of PostgreSQL 17+ would carry their metadata.
		args = append(args, "--schema-only", "--no-blobs")
	}
	for _, p := range j.excludeData {
		args = append(args, "--exclude-table-data="+p)
	}
	dump := exec.CommandContext(ctx, j.tools.Path(pgtool.PgDump), args...)
	dump.Env = j.src.Environ()
	p := &pipeline{dump: dump, dumpErr: &tail{}, restoreErr: &tail{objects: new(atomic.Int64), tables: new(atomic.Int64)}}
	guard(p.dump)
	p.dump.Stderr = p.dumpErr
	out, err := p.dump.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p.out = out
	if err := p.dump.Start(); err != nil {
		return nil, fmt.Errorf("start pg_dump: %w", err)
	}
	return p, nil
}

// stop ends a dump that no restore took (a nil pipeline is none).
func (p *pipeline) stop() {
	if p == nil || p.consumed {
		return
	}
	p.consumed = true
	_ = p.fail(nil)
}

// pipeline is a running dump | restore with Go in between (it counts the bytes and can read the
// archive's table of contents before the restore starts).
type pipeline struct {
	dump                *exec.Cmd
	dumpErr, restoreErr *tail
	out                 io.ReadCloser
	copied              atomic.Int64
	consumed            bool // handed to a restore, which waits for the dump
}

func (p *pipeline) run(ctx context.Context, s *Service, j restoreJob, restorePath string) ([]notCarried, error) {
	var prefix []byte
	var left []notCarried
	restoreArgs := []string{"--no-owner", "--no-acl", "--single-transaction", "--exit-on-error", "--verbose",
		"--no-password", "--dbname=" + j.dstDB}
	if len(j.leaveOut) > 0 {
		list, read, err := p.tableOfContents(ctx, restorePath)
		prefix = read
		if err != nil {
			return nil, p.fail(err)
		}
		dir, err := os.MkdirTemp("", "dataenv-restore-list-")
		if err != nil {
			return nil, p.fail(err)
		}
		defer os.RemoveAll(dir)
		var text string
		text, left = list.without(j.leaveOut)
		file := filepath.Join(dir, "list")
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			return nil, p.fail(err)
		}
		restoreArgs = append(restoreArgs, "--use-list="+file)
	}
	restore := exec.CommandContext(ctx, restorePath, restoreArgs...)
	restore.Env = j.dst.Environ()
	guard(restore)
	restore.Stderr = p.restoreErr
	in, err := restore.StdinPipe()
	if err != nil {
		return nil, p.fail(err)
	}
	if err := restore.Start(); err != nil {
		return nil, p.fail(fmt.Errorf("start pg_restore: %w", err))
	}
	now := func() loadProgress {
		return loadProgress{p.copied.Load(), p.restoreErr.objects.Load(), p.restoreErr.tables.Load()}
	}
	stop := reportEvery(j.every, func() { j.report(ctx, now()) })
	defer j.watch.close(ctx)
	copyErr := p.pump(in, prefix)
	_ = in.Close()
	de, re := p.dump.Wait(), restore.Wait()
	stop()
	j.progress(now())
	switch {
	case re != nil && (de == nil || copyErr != nil): // the restore stopped first; pg_dump's broken pipe follows
		return nil, fmt.Errorf("pg_restore failed: %s", toolError(p.restoreErr.String(), "pg_restore"))
	case de != nil:
		return nil, fmt.Errorf("pg_dump of the parent failed: %s", toolError(p.dumpErr.String(), "pg_dump"))
	case copyErr != nil:
		return nil, fmt.Errorf("copy pg_dump's output into pg_restore: %w", copyErr)
	case ctx.Err() != nil:
		return nil, ctx.Err()
	}
	return left, nil
}

// report tells the load's progress, or what it waits for if it stalls on a lock.
func (j restoreJob) report(ctx context.Context, p loadProgress) {
	if j.waiting != nil && j.watch != nil {
		if what := j.watch.waits(ctx, p.Bytes); what != "" {
			j.waiting(what)
			return
		}
	}
	j.progress(p)
}

// fail stops the dump and returns err, or the dump's own error when it had failed already (a
// listing that found no table of contents fails because of it).
func (p *pipeline) fail(err error) error {
	_ = p.out.Close()
	dumpFailed := p.dumpErr.String() != ""
	_ = p.dump.Process.Kill()
	_ = p.dump.Wait()
	if dumpFailed {
		return fmt.Errorf("pg_dump of the parent failed: %s", toolError(p.dumpErr.String(), "pg_dump"))
	}
	return err
}

// tableOfContents feeds the start of the archive to pg_restore --list until it has read the
// table of contents (a custom archive written to a pipe starts with it) and returns the listing
// and every byte read so far, which the restore must be given first.
func (p *pipeline) tableOfContents(ctx context.Context, restorePath string) (toc, []byte, error) {
	lister := exec.CommandContext(ctx, restorePath, "--list", "--verbose")
	guard(lister)
	var listing bytes.Buffer
	errs := &tail{}
	lister.Stdout, lister.Stderr = &listing, errs
	in, err := lister.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := lister.Start(); err != nil {
		return nil, nil, fmt.Errorf("start pg_restore --list: %w", err)
	}
	var read []byte
	buf := make([]byte, 64<<10)
	for {
		n, rerr := p.out.Read(buf)
		if n > 0 {
			read = append(read, buf[:n]...)
			p.copied.Add(int64(n))
			if _, werr := in.Write(buf[:n]); werr != nil {
				break // the lister has what it needs and has gone
			}
		}
		if rerr != nil {
			break
		}
		if len(read) > tocMax {
			_ = in.Close()
			_ = lister.Wait()
			return nil, read, fmt.Errorf("pg_restore --list read %d bytes without finishing the table of contents", len(read))
		}
	}
	_ = in.Close()
	if err := lister.Wait(); err != nil {
		return nil, read, fmt.Errorf("pg_restore --list failed: %s", toolError(errs.String(), "pg_restore"))
	}
	list, err := parseTOC(listing.String())
	return list, read, err
}

// tocMax bounds the table of contents read into memory (every object's DDL is in it).
const tocMax = 1 << 30

// pump writes prefix, then the rest of the dump, into in. On a write error (the restore stopped)
// it closes the dump's output so that pg_dump stops too.
func (p *pipeline) pump(in io.Writer, prefix []byte) error {
	if _, err := in.Write(prefix); err != nil {
		_ = p.out.Close()
		return err
	}
	buf := make([]byte, 256<<10)
	for {
		n, rerr := p.out.Read(buf)
		if n > 0 {
			if _, werr := in.Write(buf[:n]); werr != nil {
				_ = p.out.Close()
				return werr
			}
			p.copied.Add(int64(n))
		}
		if errors.Is(rerr, io.EOF) {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// guard makes a child die with the sidecar and bounds its wait after cancellation.
func guard(c *exec.Cmd) {
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	c.WaitDelay = 5 * time.Second
}

// toc is pg_restore --list --verbose output: entries ("<id>; <catalog> <oid> <desc> ...") each
// followed by its dependencies ("; depends on: <id> ...").
type toc []tocEntry

type tocEntry struct {
	line         string
	id           int
	catalog, oid uint32
	rest         string // desc, schema, name, owner
	deps         []int
}

var tocLine = regexp.MustCompile(`^(\d+); (\d+) (\d+) (.*)$`)

func parseTOC(text string) (toc, error) {
	var out toc
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := tocLine.FindStringSubmatch(line); m != nil {
			id, _ := strconv.Atoi(m[1])
			cat, _ := strconv.ParseUint(m[2], 10, 32)
			oid, _ := strconv.ParseUint(m[3], 10, 32)
			out = append(out, tocEntry{line: line, id: id, catalog: uint32(cat), oid: uint32(oid), rest: m[4]})
			continue
		}
		if deps, ok := strings.CutPrefix(strings.TrimSpace(strings.TrimPrefix(line, ";")), "depends on:"); ok && len(out) > 0 {
			for _, f := range strings.Fields(deps) {
				if d, err := strconv.Atoi(f); err == nil {
					out[len(out)-1].deps = append(out[len(out)-1].deps, d)
				}
			}
		}
	}
	return out, sc.Err()
}

// attached are the kinds of entries that only decorate another object: left out with it.
var attached = []string{"COMMENT ", "SECURITY LABEL ", "ACL ", "PUBLICATION TABLE ", "PUBLICATION TABLES IN SCHEMA "}

// without is the list for pg_restore --use-list that leaves out the objects of leave (matched by
// catalog and OID, never by name) and the entries attached to them, and what was left out.
func (t toc) without(leave []uncreatable) (string, []notCarried) {
	type key struct{ cat, oid uint32 }
	want := map[key]uncreatable{}
	for _, u := range leave {
		if u.Catalog != 0 || u.rows {
			want[key{u.Catalog, u.OID}] = u
		}
	}
	out := map[int]bool{}
	var left []notCarried
	for _, e := range t {
		u, ok := want[key{e.catalog, e.oid}]
		if !ok || (e.catalog == 0 && !isRows(e.rest)) {
			continue
		}
		out[e.id] = true
		if !u.carried {
			left = append(left, u.notCarried)
		}
	}
	for changed := true; changed; {
		changed = false
		for _, e := range t {
			if out[e.id] || !isAttached(e.rest) {
				continue
			}
			for _, d := range e.deps {
				if out[d] {
					out[e.id], changed = true, true
					break
				}
			}
		}
	}
	var b strings.Builder
	for _, e := range t {
		if out[e.id] {
			b.WriteString(";")
		}
		b.WriteString(e.line)
		b.WriteByte('\n')
	}
	for _, u := range leave { // what the dump never had (subscriptions, security labels)
		if u.Catalog == 0 && !u.rows {
			left = append(left, u.notCarried)
		}
	}
	return b.String(), left
}

// isRows: the entry loads a relation's rows (the archive lists it with catalog 0 and the
// relation's OID).
func isRows(rest string) bool {
	return strings.HasPrefix(rest, "TABLE DATA ") || strings.HasPrefix(rest, "SEQUENCE SET ")
}

func isAttached(rest string) bool {
	for _, a := range attached {
		if strings.HasPrefix(rest, a) {
			return true
		}
	}
	return false
}

// toolError is the part of a tool's stderr a person needs: the failing object (pg_restore's "from
// TOC entry" line) and the error with its detail, hint and command, not the progress lines
// that came before (--verbose writes one per object).
func toolError(stderr, tool string) string {
	var object string
	var msgs []string
	for _, l := range strings.Split(stderr, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.Contains(l, "from TOC entry "):
			if _, after, ok := strings.Cut(l, "from TOC entry "); ok {
				object = restoredObject(after)
			}
		case strings.Contains(l, "error:"), strings.Contains(l, "ERROR:"), strings.Contains(l, "detail:"),
			strings.HasPrefix(l, "DETAIL:"), strings.HasPrefix(l, "HINT:"), strings.HasPrefix(l, "CONTEXT:"),
			strings.HasPrefix(l, "Command was:"), strings.Contains(l, "FATAL:"):
			msgs = append(msgs, strings.TrimPrefix(strings.TrimPrefix(l, tool+": "), "error: "))
		}
	}
	if len(msgs) == 0 {
		return lastLines(stderr, 5)
	}
	out := strings.Join(msgs, "; ")
	if object != "" {
		out = object + ": " + out
	}
	return truncateText(out, 2000)
}

// restoredObject names the object of a TOC entry line ("<id>; <catalog> <oid> <desc> <schema>
// <name> <owner>") without its numbers: "TABLE DATA app orders (TOC entry 3301)".
func restoredObject(entry string) string {
	id, rest, _ := strings.Cut(entry, "; ")
	f := strings.SplitN(rest, " ", 3)
	if len(f) < 3 {
		return "TOC entry " + entry
	}
	return f[2] + " (TOC entry " + id + ")"
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "; ")
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
