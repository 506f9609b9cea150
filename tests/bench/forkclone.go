package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/localpg"
	"github.com/dataenv/dataenv/tests/testenv"
)

// The clone rows of the forks suite: full_copy of an idle parent on PostgreSQL 18 whose data
// directory is on Btrfs (a file system in an image on a loop device, inside the PostgreSQL 18
// root), where create_fork copies by CREATE DATABASE ... STRATEGY FILE_COPY with
// file_copy_method = clone, beside CREATE DATABASE of an empty database and today's TEMPLATE
// copy (WAL_LOG) of the same parent, in the same run.

// CloneRow is one parent size on one file system: the median of each operation.
type CloneRow struct {
	FS          string
	Label       string
	ParentBytes int64
	// create_fork full_copy as the sidecar ran it: by clone, and by TEMPLATE (the admin without
	// pg_read_all_settings, so the clone check says no).
	ForkClone, ForkTemplate             time.Duration
	ForkCloneMethod, ForkTemplateMethod string
	// The plain statements on the same cluster.
	RawClone, RawTemplate, RawEmpty time.Duration
}

// cloneParents: an empty parent (a fresh database) and two of about 100 MB and 1 GB.
var cloneParents = []struct {
	label string
	rows  int // of ~1 KB each
}{{"empty", 0}, {"~100 MB", 100_000}, {"~1 GB", 1_000_000}}

type cloneBench struct {
	fb      *forkBench
	env     *Env
	pg      *localpg.Cluster
	admin   string
	appRole string
	fs      *testenv.LoopFS
	name    string // the cluster's name in the control database
	// templates: also time the TEMPLATE copies (WAL_LOG, the fork without clone), which do not
	// depend on the file system's cloning and take most of the time: on the first one only.
	templates bool
}

// cloneFileSystems are the file systems that clone, each measured on its own cluster.
var cloneFileSystems = []string{"xfs", "btrfs"}

// CloneBench measures the clone rows on each of cloneFileSystems; one this machine will not
// mount (not root, no loop device, a kernel without it) is skipped, with the reason in skipped.
// A missing PostgreSQL 18 root is an error.
func CloneBench(ctx context.Context, env *Env, fb *forkBench, reps int) (rows []CloneRow, skipped map[string]string, err error) {
	srv, err := testenv.FindPGServer(18)
	if err != nil {
		return nil, nil, err
	}
	skipped = map[string]string{}
	for i, fsType := range cloneFileSystems {
		r, why, err := cloneBenchOn(ctx, env, fb, srv, fsType, fmt.Sprintf("pg18%s", fsType), i, reps)
		if err != nil {
			return nil, nil, err
		}
		if why != "" {
			skipped[fsType] = why
			env.Progress("forks: the PostgreSQL 18 clone rows on %s are skipped: %s", fsType, why)
		}
		rows = append(rows, r...)
	}
	return rows, skipped, nil
}

// cloneBenchOn measures the clone rows on one file system, registered as cluster name.
func cloneBenchOn(ctx context.Context, env *Env, fb *forkBench, srv testenv.PGServer, fsType, name string, n, reps int) ([]CloneRow, string, error) {
	parent := ""
	if srv.Root != "" {
		// The server checks the cluster directory against its root with symlinks resolved (a
		// worktree's .deps is a symlink to the main checkout's).
		root, err := filepath.EvalSymlinks(srv.Root)
		if err != nil {
			root = srv.Root
		}
		parent = filepath.Join(root, "tmp")
	}
	fs, err := testenv.MountLoopFS(fsType, parent, 16<<30)
	if err != nil {
		return nil, err.Error(), nil
	}
	cb := &cloneBench{fb: fb, env: env, fs: fs, name: name, templates: n == 0}
	defer cb.close()
	if err := cb.start(ctx, srv); err != nil {
		return nil, "", err
	}
	parents := cloneParents
	if env.Quick {
		parents = parents[:2]
	}
	var rows []CloneRow
	for i, p := range parents {
		env.Progress("forks: PostgreSQL 18 on %s, parent %s, %d run(s)", fsType, p.label, reps)
		row, err := cb.measure(ctx, n*10+i, p.label, p.rows, reps)
		if err != nil {
			return nil, "", fmt.Errorf("clone rows on %s, parent %s: %w", fsType, p.label, err)
		}
		row.FS = fsType
		rows = append(rows, row)
	}
	return rows, "", nil
}

// start runs PostgreSQL 18 with its data directory on the Btrfs image, makes a managed-service
// kind of admin (CREATEDB CREATEROLE) that may read data_directory, and registers and sets up
// the cluster in the forks suite's control database.
func (cb *cloneBench) start(ctx context.Context, srv testenv.PGServer) error {
	var err error
	cb.env.Progress("forks: starting PostgreSQL 18 on %s (%s)", cb.fs.Type, cb.fs.Dir)
	cb.pg, err = localpg.Start(ctx, localpg.Config{Name: cb.name, Root: srv.Root, BinDir: srv.BinDir,
		Dir: filepath.Join(cb.fs.Dir, "pg"), Fsync: cb.env.Fsync,
		Settings: map[string]string{"log_min_messages": "warning", "max_wal_size": "'4GB'"}})
	if err != nil {
		return err
	}
	cb.admin, cb.appRole = "bench_clone_admin", "dataenv_bench_"+cb.name+"_app"
	pw := "bench-clone-admin"
	if err := cb.super(ctx, "postgres", `CREATE ROLE `+cb.admin+` LOGIN CREATEDB CREATEROLE PASSWORD '`+pw+`';
		GRANT pg_read_all_settings TO `+cb.admin); err != nil {
		return err
	}
	if err := cb.fb.exec(ctx, "bench_forks_control", `SELECT dataenv.register_cluster($1, $2, $3, $4, $5, 'disable')`,
		cb.name, cb.pg.Host(), cb.pg.Port(), cb.admin, pw); err != nil {
		return err
	}
	if err := cb.fb.exec(ctx, "bench_forks_control", `SELECT dataenv.update_cluster($1, app_role => $2, replication_role => $3)`,
		cb.name, cb.appRole, "dataenv_bench_"+cb.name+"_repl"); err != nil {
		return err
	}
	_, err = cb.fb.handle(ctx, "setup_cluster", map[string]any{"cluster": cb.name})
	return err
}

func (cb *cloneBench) close() {
	if cb.pg != nil {
		_ = cb.pg.Stop(context.Background())
	}
	if err := cb.fs.Unmount(); err != nil {
		cb.env.Progress("forks: unmount %s: %v", cb.fs.Dir, err)
	}
}

// measure makes a parent of rows ~1 KB rows (owned by the application role, through
// create_database) and times each operation reps times.
func (cb *cloneBench) measure(ctx context.Context, i int, label string, rows, reps int) (CloneRow, error) {
	row := CloneRow{Label: label}
	db := fmt.Sprintf("bench_clone_%d", i)
	if _, err := cb.fb.handle(ctx, "create_database", map[string]any{"cluster": cb.name, "name": db}); err != nil {
		return row, err
	}
	if rows > 0 {
		if err := cb.super(ctx, db, fmt.Sprintf(`SET ROLE %s;
			CREATE TABLE big (id bigint PRIMARY KEY, pad text NOT NULL);
			INSERT INTO big SELECT g, repeat(md5(g::text), 30) FROM generate_series(1, %d) g`, cb.appRole, rows)); err != nil {
			return row, err
		}
		if err := cb.super(ctx, db, `VACUUM (FREEZE, ANALYZE) big`); err != nil {
			return row, err
		}
	}
	var size int64
	if err := cb.query(ctx, `SELECT pg_database_size($1)`, []any{db}, &size); err != nil {
		return row, err
	}
	row.ParentBytes = size
	ws := fmt.Sprintf("bench18-%d", i)
	if err := cb.fb.exec(ctx, "bench_forks_control", `SELECT dataenv.create_workspace($1)`, ws); err != nil {
		return row, err
	}
	if err := cb.fb.exec(ctx, "bench_forks_control", `SELECT dataenv.add_datatable($1, 'd', $2, $3)`, ws, cb.name, db); err != nil {
		return row, err
	}
	var fc, ft, rc, rt, re []time.Duration
	for r := range reps {
		d, m, err := cb.fork(ctx, ws, fmt.Sprintf("%s-c%d", ws, r))
		if err != nil {
			return row, err
		}
		fc, row.ForkCloneMethod = append(fc, d), m
		if d, err = cb.raw(ctx, "bench_clone_raw", "TEMPLATE "+db+" STRATEGY FILE_COPY", true); err != nil {
			return row, err
		}
		rc = append(rc, d)
		if d, err = cb.raw(ctx, "bench_clone_raw", "", false); err != nil {
			return row, err
		}
		re = append(re, d)
		if !cb.templates {
			continue
		}
		if d, err = cb.raw(ctx, "bench_clone_raw", "TEMPLATE "+db, false); err != nil {
			return row, err
		}
		rt = append(rt, d)
		if err := cb.super(ctx, "postgres", `REVOKE pg_read_all_settings FROM `+cb.admin); err != nil {
			return row, err
		}
		d, m, err = cb.fork(ctx, ws, fmt.Sprintf("%s-t%d", ws, r))
		if err != nil {
			return row, err
		}
		ft, row.ForkTemplateMethod = append(ft, d), m
		if err := cb.super(ctx, "postgres", `GRANT pg_read_all_settings TO `+cb.admin); err != nil {
			return row, err
		}
	}
	row.ForkClone, row.RawClone, row.RawEmpty = medianDuration(fc), medianDuration(rc), medianDuration(re)
	if cb.templates {
		row.ForkTemplate, row.RawTemplate = medianDuration(ft), medianDuration(rt)
	}
	return row, nil
}

// fork times a full_copy create_fork after a CHECKPOINT of the PostgreSQL 18 cluster.
func (cb *cloneBench) fork(ctx context.Context, ws, fork string) (time.Duration, string, error) {
	if err := cb.super(ctx, "postgres", `CHECKPOINT`); err != nil {
		return 0, "", err
	}
	return cb.fb.fork(ctx, ws, fork, "full_copy", "")
}

// raw times CREATE DATABASE name <clause> as the superuser (file_copy_method = clone when
// clone), after a CHECKPOINT, then drops the database.
func (cb *cloneBench) raw(ctx context.Context, name, clause string, clone bool) (time.Duration, error) {
	conn, err := pgx.Connect(ctx, cb.pg.DSN("postgres"))
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `DROP DATABASE IF EXISTS `+name); err != nil {
		return 0, err
	}
	if clone {
		if _, err := conn.Exec(ctx, `SET file_copy_method = clone`); err != nil {
			return 0, err
		}
	}
	if _, err := conn.Exec(ctx, `CHECKPOINT`); err != nil {
		return 0, err
	}
	start := time.Now()
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+name+` `+clause); err != nil {
		return 0, fmt.Errorf("CREATE DATABASE %s %s: %w", name, clause, err)
	}
	took := time.Since(start)
	_, err = conn.Exec(ctx, `DROP DATABASE `+name)
	return took, err
}

func (cb *cloneBench) super(ctx context.Context, db, sql string) error {
	conn, err := pgx.Connect(ctx, cb.pg.DSN(db))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", firstLine(sql), err)
	}
	return nil
}

func (cb *cloneBench) query(ctx context.Context, sql string, args []any, dest ...any) error {
	conn, err := pgx.Connect(ctx, cb.pg.DSN("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return conn.QueryRow(ctx, sql, args...).Scan(dest...)
}

// renderClone is the clone section of the forks suite's markdown.
func renderClone(b *strings.Builder, rows []CloneRow, skipped map[string]string, reps int) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("### full_copy on PostgreSQL 18 with a reflink clone\n\n")
	w("PostgreSQL 18 (from its Debian root) with the data directory on XFS (mkfs.xfs -m reflink=1) or Btrfs, each in an image ")
	w("on a loop device, one cluster each; the cluster's admin is a CREATEDB CREATEROLE role granted pg_read_all_settings, ")
	w("so the sidecar can check data_directory's file system. Parent: one table of ~1 KB rows, vacuumed; nobody connected. ")
	w("Each timed operation starts after a CHECKPOINT; fsync on; median of %d runs; milliseconds.\n\n", reps)
	for _, fs := range cloneFileSystems {
		if why, ok := skipped[fs]; ok {
			w("**%s not measured in this run:** this machine would not mount its image (%s).\n\n", fs, why)
		}
	}
	if len(rows) == 0 {
		return
	}
	w("| file system | parent | size | create_fork full_copy (clone) | CREATE DATABASE … STRATEGY FILE_COPY, clone | CREATE DATABASE (empty) | clone fork / empty | clone fork / clone fork of the empty parent | CREATE DATABASE … TEMPLATE (WAL_LOG) | create_fork full_copy (TEMPLATE) |\n")
	w("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	var base CloneRow
	for _, r := range rows {
		if r.ParentBytes < 64<<20 || base.FS != r.FS {
			base = r // the first (empty) parent of each file system
		}
		w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.FS, r.Label, humanSize(r.ParentBytes), ms(r.ForkClone), ms(r.RawClone),
			ms(r.RawEmpty), ratio(float64(r.ForkClone), float64(r.RawEmpty)), ratio(float64(r.ForkClone), float64(base.ForkClone)),
			msOrDash(r.RawTemplate), msOrDash(r.ForkTemplate))
	}
	w("\nMethods the sidecar reported: ")
	for i, r := range rows {
		if i > 0 {
			w("; ")
		}
		w("%s %s: %s with pg_read_all_settings", r.FS, r.Label, r.ForkCloneMethod)
		if r.ForkTemplateMethod != "" {
			w(", %s without", r.ForkTemplateMethod)
		}
	}
	w(".\n\n%s", cloneMethod)
}

// msOrDash is ms, or a dash for an operation not measured.
func msOrDash(d time.Duration) string {
	if d == 0 {
		return "—"
	}
	return ms(d)
}

func humanSize(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
	}
	return fmt.Sprintf("%d KiB", b>>10)
}

const cloneMethod = `How to read it: with file_copy_method = clone, CREATE DATABASE ... STRATEGY FILE_COPY asks the
file system to share the parent's extents (copy_file_range, a reflink on XFS and Btrfs), so its
cost is the database's file count (each copied file is fsynced) and two checkpoints, not its
bytes: flat in the parent's size, like CREATE DATABASE of an empty database (which copies
template1, about 7.5 MB, through the WAL). The per-file fsync is what separates the two file
systems here: cheap on XFS, several times dearer on Btrfs over a loop device. The clone fork adds
the fork's fixed overhead (admin connections, the clone check, the staging name, comment and
rename, the registry and the workspace commit). TEMPLATE without clone is the default WAL_LOG
strategy, which reads and logs every block: it grows with the parent. The sidecar clones only
where it checked that it can (PostgreSQL 18+, data_directory readable and on a file system that
clones); the TEMPLATE fork column is the same parent once the admin lost pg_read_all_settings.
The TEMPLATE columns are measured on the first file system only (they do not clone, and take most
of the suite's time).
`
