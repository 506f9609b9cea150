package workspace

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
	"github.com/dataenv/dataenv/sidecar/internal/crashpoint"
	"github.com/dataenv/dataenv/sidecar/internal/pgtool"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// Copy methods.
const (
	MethodClone    = "clone"    // CREATE DATABASE ... TEMPLATE parent STRATEGY FILE_COPY, file_copy_method = clone
	MethodTemplate = "template" // CREATE DATABASE ... TEMPLATE parent
	MethodDump     = "dump"     // pg_dump, then psql (schema_only) or pg_restore (full_copy)
)

// ensureCopy makes the fork copy of one datatable, converging after a crash at any point:
//
//  1. A ready registry row of this request: done. A row of another request: refused (the
//     previous incarnation's cleanup ran before and would have removed it). A row of this
//     request still creating: an interrupted attempt, whose database may be partial: dropped
//     (guarded) and made again.
//  2. Under the cluster's lifecycle lock: register the copy (state creating) BEFORE the
//     database exists, so the ledger always covers it; then create the marked database, a copy
//     of the parent for a full_copy whose parent has no other sessions (a reflink clone where
//     the cluster can, else TEMPLATE), else empty.
//  3. Without the lock (a long copy must not block the cluster): dump and restore in one
//     transaction, reporting progress.
//  4. Mark the row ready.
func (s *Service) ensureCopy(ctx context.Context, req *request.Request, rep request.Reporter, fork string, it *planItem) error {
	row, err := readCopy(ctx, s.cfg.Control, it.Cluster, it.Database)
	if err != nil {
		return err
	}
	step := fmt.Sprintf("copy datatable %s (%s)", it.Datatable, it.Mode)
	switch {
	case row != nil && row.Request != req.ID:
		return request.Refusef("create_fork: database %q on cluster %q is registered as a fork copy for workspace %q by request %s",
			it.Database, it.Cluster, row.Workspace, row.Request)
	case row != nil && row.State == StateReady:
		it.Method, it.Status = row.Method, "unchanged"
		return nil
	case row != nil:
		request.Report(ctx, rep, step, "restarted", "an earlier attempt was interrupted; its database is dropped and made again")
		if err := s.dropCopy(ctx, rep, *row); err != nil {
			return fmt.Errorf("drop the interrupted copy %q: %w", it.Database, err)
		}
	}
	started := s.cfg.Now()
	c := Copy{Cluster: it.Cluster, Database: it.Database, Workspace: fork, Datatable: it.Datatable, Mode: it.Mode,
		ParentDatabase: it.ParentDatabase, Request: req.ID}
	job, err := s.createCopyDatabase(ctx, rep, c, it)
	if err != nil {
		return err
	}
	defer job.src.Close()
	defer job.dst.Close()
	crashpoint.HitOnce(CrashAfterCreateDatabase)
	if it.Method == MethodDump {
		request.Report(ctx, rep, step, "loading", fmt.Sprintf("pg_dump %s (%s) of %s into %s", job.tools.Version, job.tools.Dir, it.ParentDatabase, it.Database))
		job.progress = func(b, n int64) {
			request.Report(ctx, rep, step, "progress", fmt.Sprintf("%s streamed, %d objects restored", humanBytes(b), n))
		}
		if err := s.load(ctx, *job); err != nil {
			return fmt.Errorf("copy datatable %q into %q: %w", it.Datatable, it.Database, err)
		}
	}
	crashpoint.HitOnce(CrashAfterLoad)
	if _, err := s.cfg.Control.Exec(ctx, `UPDATE dataenv.fork_copies SET state = 'ready', ready_at = now()
		WHERE cluster = $1 AND database = $2 AND created_by_request = $3`, c.Cluster, c.Database, c.Request); err != nil {
		return retryable(fmt.Errorf("mark fork copy %q ready: %w", c.Database, err))
	}
	it.Status = "created"
	request.Report(ctx, rep, step, "done", fmt.Sprintf("%s by %s in %s", it.Database, it.Method, s.cfg.Now().Sub(started).Round(time.Millisecond)))
	return nil
}

// createCopyDatabase registers the copy and creates its database under the lifecycle lock, and
// returns the libpq environments of the parent and the copy (and the tools) for the load.
func (s *Service) createCopyDatabase(ctx context.Context, rep request.Reporter, c Copy, it *planItem) (*loadJob, error) {
	job := &loadJob{mode: it.Mode, dstDB: it.Database, every: s.cfg.ProgressEvery}
	err := s.cfg.Clusters.WithLifecycleLock(ctx, c.Cluster, rep, func(ctx context.Context, l *cluster.Locked) error {
		if err := registerCopy(ctx, l.Control(), c); err != nil {
			return err
		}
		conn, err := l.Connect(ctx, "")
		if err != nil {
			return err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		st, err := s.createDatabase(ctx, l, conn, c, func(detail string) {
			request.Report(ctx, rep, fmt.Sprintf("copy datatable %s (%s)", it.Datatable, it.Mode), "copying", detail)
		})
		if err != nil {
			return err
		}
		it.Method, it.CloneUnavailable, job.tools = st.method, st.cloneUnavailable, st.tools
		if _, err := l.Control().Exec(ctx, `UPDATE dataenv.fork_copies SET method = $3 WHERE cluster = $1 AND database = $2`,
			c.Cluster, c.Database, st.method); err != nil {
			return retryable(err)
		}
		job.appRole = l.Cluster().AppRole
		if job.src, err = l.Libpq(c.ParentDatabase); err != nil {
			return err
		}
		job.dst, err = l.Libpq(c.Database)
		return err
	})
	if err != nil {
		job.src.Close()
		job.dst.Close()
		return nil, err
	}
	return job, nil
}

// copyStart is how a copy's database was made.
type copyStart struct {
	method           string
	cloneUnavailable string     // why an idle parent's full_copy did not clone
	tools            pgtool.Set // MethodDump: the tools for the cluster's server version
}

// createDatabase creates the copy's marked database: a copy of the parent for a full_copy whose
// parent has no other sessions (createFromTemplate), else an empty one for dump and restore,
// once tools at least as new as the cluster's server are found (refused otherwise, before
// anything is created).
func (s *Service) createDatabase(ctx context.Context, l *cluster.Locked, conn *pgx.Conn, c Copy, report func(string)) (copyStart, error) {
	var st copyStart
	if c.Mode == ModeFullCopy {
		idle, err := noOtherSessions(ctx, conn, c.ParentDatabase)
		if err != nil {
			return st, err
		}
		if idle {
			if err := s.createFromTemplate(ctx, l, conn, c, &st, report); err != nil || st.method != "" {
				return st, err
			}
		}
	}
	tools, err := s.cfg.Tools.For(ctx, cluster.ServerVersion(conn))
	if err != nil {
		return st, request.Refusef("copy %s of cluster %q: %v", c.ParentDatabase, c.Cluster, err)
	}
	if _, err := l.CreateMarkedDatabase(ctx, c.Database, cluster.CreateOptions{Request: c.Request, ForWorkspace: c.Workspace}); err != nil {
		return st, err
	}
	st.method, st.tools = MethodDump, tools
	return st, nil
}

// createFromTemplate copies an idle parent into the copy's database: by clone where the cluster
// can (cluster.Locked.CanClone: PostgreSQL 18+, a data directory on a file system that clones),
// else by TEMPLATE, today's default; st.cloneUnavailable says why it did not clone. A clone that
// fails is made again by TEMPLATE. When the template copy itself is refused (a session connected
// meanwhile, or the admin may not copy that database) st.method stays empty: the caller dumps
// and restores instead.
func (s *Service) createFromTemplate(ctx context.Context, l *cluster.Locked, conn *pgx.Conn, c Copy, st *copyStart, report func(string)) error {
	opts := cluster.CreateOptions{Request: c.Request, ForWorkspace: c.Workspace, Template: c.ParentDatabase}
	ok, why, err := l.CanClone(ctx, conn)
	if err != nil {
		return err
	}
	if ok {
		opts.Clone = true
		report("CREATE DATABASE " + c.Database + " TEMPLATE " + c.ParentDatabase + " STRATEGY FILE_COPY (file_copy_method = clone)")
		_, err := l.CreateMarkedDatabase(ctx, c.Database, opts)
		if err == nil {
			st.method = MethodClone
			return nil
		}
		if templateRefused(err) {
			s.log.Info("template copy refused; falling back to dump and restore", "database", c.Database, "error", err)
			return nil
		}
		why = "the clone failed (" + err.Error() + ")"
		s.log.Info("clone failed; copying by TEMPLATE", "database", c.Database, "error", err)
		opts.Clone = false
	}
	st.cloneUnavailable = why
	report("CREATE DATABASE " + c.Database + " TEMPLATE " + c.ParentDatabase)
	if _, err := l.CreateMarkedDatabase(ctx, c.Database, opts); err != nil {
		if !templateRefused(err) {
			return err
		}
		s.log.Info("template copy refused; falling back to dump and restore", "database", c.Database, "error", err)
		return nil
	}
	st.method = MethodTemplate
	return nil
}

// templateRefused: 55006 (the template has sessions) or 42501 (the admin may not clone it).
func templateRefused(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "55006" || pgErr.Code == "42501")
}

func noOtherSessions(ctx context.Context, conn *pgx.Conn, database string) (bool, error) {
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE datname = $1 AND pid <> pg_catalog.pg_backend_pid()`,
		database).Scan(&n); err != nil {
		return false, retryable(fmt.Errorf("count the sessions of %q: %w", database, err))
	}
	return n == 0, nil
}

func humanBytes(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}
