package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
	"github.com/dataenv/dataenv/sidecar/internal/crashpoint"
	"github.com/dataenv/dataenv/sidecar/internal/lock"
	"github.com/dataenv/dataenv/sidecar/internal/pgtool"
	"github.com/dataenv/dataenv/sidecar/internal/request"
	"github.com/dataenv/dataenv/sidecar/names"
)

// Copy methods.
const (
	MethodClone          = "clone"           // CREATE DATABASE ... TEMPLATE parent STRATEGY FILE_COPY, file_copy_method = clone
	MethodTemplate       = "template"        // CREATE DATABASE ... TEMPLATE parent
	MethodDump           = "dump"            // pg_dump | pg_restore into an empty database
	MethodSchemaTemplate = "schema_template" // CREATE DATABASE ... TEMPLATE <the datatable's schema template>
)

// ensureCopy makes the fork copy of one datatable, converging after a crash at any point:
//
//  1. A ready registry row of this request: done. A row of another request: refused (the
//     previous incarnation's cleanup ran before and would have removed it). A row of this
//     request still creating: an interrupted attempt, whose database may be partial: dropped
//     (guarded) and made again.
//  2. The parent's plan is read (what the copy must keep, parent.go) while the fork's owner
//     role is made (readPlanWithOwner).
//  3. Under the cluster's lifecycle lock: register the copy (state creating) BEFORE the
//     database exists, so the ledger always covers it; then create the marked, private database
//     owned by the fork's owner: a copy of the parent (full_copy, nobody connected, owners the
//     admin may act as, no event trigger: a reflink clone where the cluster can, else TEMPLATE),
//     a TEMPLATE copy of the datatable's current schema template (schema_only), or empty (dump
//     and restore, once tools at least as new as the server are found).
//  4. Without the lock (a long copy must not block the cluster): dump and restore in one
//     transaction as the owner, reporting progress.
//  5. Finish: owners mapped, privileges, default privileges, sequences, settings and the
//     database's access list as the parent's (finish.go). Then the row is marked ready, with
//     the report.
func (s *Service) ensureCopy(ctx context.Context, req *request.Request, rep request.Reporter, fork string, incarnation time.Time, it *planItem) error {
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
		it.Method, it.Status, it.Fidelity = row.Method, "unchanged", row.Report
		return nil
	case row != nil:
		request.Report(ctx, rep, step, "restarted", "an earlier attempt was interrupted; its database is dropped and made again")
		if err := s.dropCopy(ctx, rep, *row); err != nil {
			return fmt.Errorf("drop the interrupted copy %q: %w", it.Database, err)
		}
	}
	started := s.cfg.Now()
	c := Copy{Cluster: it.Cluster, Database: it.Database, Workspace: fork, Datatable: it.Datatable, Mode: it.Mode,
		ParentDatabase: it.ParentDatabase, Request: req.ID, incarnation: incarnation}
	var read readTimes
	reading, err := s.readPlanWithOwner(ctx, rep, &c, it.Source, &read)
	if c.maint != nil {
		defer c.maint.Close(ctx)
	}
	if err != nil {
		return err
	}
	planned := s.cfg.Now()
	job, err := s.startCopyOf(ctx, rep, &c, it, reading)
	plan, perr := reading.Plan()
	if err != nil {
		return err
	}
	defer job.close(ctx)
	if perr != nil {
		return perr
	}
	created := job.phases
	crashpoint.HitOnce(CrashAfterCreateDatabase)
	phases := newPhaseTimes(s.cfg.Now)
	fid, err := s.loadAndFinish(ctx, rep, step, it, plan, job, phases)
	if err != nil {
		return fmt.Errorf("copy datatable %q into %q: %w", it.Datatable, it.Database, err)
	}
	crashpoint.HitOnce(CrashAfterLoad)
	report, err := json.Marshal(fid)
	if err != nil {
		return err
	}
	if _, err := s.cfg.Control.Exec(ctx, `UPDATE dataenv.fork_copies SET state = 'ready', ready_at = now(), report = $4
		WHERE cluster = $1 AND database = $2 AND created_by_request = $3`, c.Cluster, c.Database, c.Request, report); err != nil {
		return retryable(fmt.Errorf("mark fork copy %q ready: %w", c.Database, err))
	}
	it.Status, it.Fidelity = "created", fid
	done := s.cfg.Now()
	request.Report(ctx, rep, step, "done", fmt.Sprintf("%s by %s in %s (parent read %s: %s; database created %s: %s; loaded and finished %s: %s)",
		it.Database, it.Method, ms(done.Sub(started)), ms(planned.Sub(started)), &read, ms(created.last.Sub(planned)), created,
		ms(done.Sub(created.last)), phases))
	return nil
}

// startCopyOf creates the copy's database from the head of the plan being read (for schema_only,
// while the rest of the plan is read), once the head shows that the parent can be copied.
func (s *Service) startCopyOf(ctx context.Context, rep request.Reporter, c *Copy, it *planItem, reading *planReading) (*copyJob, error) {
	head, err := reading.Head()
	if err != nil {
		return nil, err
	}
	if len(head.Unreadable) > 0 && (it.Mode == ModeSchemaOnly || head.templateOK() != "") { // a dump is needed
		return nil, request.Refusef("create_fork: datatable %q: the cluster's admin may not read table(s) %s of %s; pg_dump and a fork need SELECT on every table",
			it.Datatable, strings.Join(head.Unreadable, ", "), it.ParentDatabase)
	}
	created := newPhaseTimes(s.cfg.Now)
	job, err := s.startCopy(ctx, rep, *c, it, head, created)
	if job != nil {
		job.phases = created
	}
	return job, err
}

// copyJob is a copy whose database exists: how it was made and what its load needs.
type copyJob struct {
	phases   *phaseTimes // where the database's creation went
	owner    string
	method   string
	reason   string          // why a full_copy of an idle parent was not a TEMPLATE copy
	template *schemaTemplate // MethodSchemaTemplate
	// spare is a ready spare of template, which the copy takes if it still can; tookSpare names
	// the one it took.
	spare     *schemaTemplate
	tookSpare string
	// adopt: the spare is taken with its role, which becomes owner (the workspace role, made by
	// the take; Copy.adopt).
	adopt *cluster.Adoption
	// tookRole: the spare was taken by a copy whose owner existed, and its role renamed to this
	// (names.TakenSpareRole); the finish re-owns its objects and drops it.
	tookRole string
	// cloneUnavailable says why a full_copy by TEMPLATE was not a reflink clone.
	cloneUnavailable string
	tools            pgtool.Set     // MethodDump: at least as new as the cluster's server
	src, dst         *cluster.Libpq // MethodDump: the parent as the admin, the copy as the owner
	// dump and total: MethodDump's pg_dump and the size of what it loads, started while the
	// copy's database was created (startLoad).
	dump  *pipeline
	total *totalReading
	// conn is the admin's connection to the copy, opened under the lifecycle lock that created
	// it, for the finish (one lock round less than opening it there).
	conn *pgx.Conn
	// dial is the admin's session to the copy, opened as soon as its database had its name
	// (cluster.CreateOptions.ConnectAhead), which becomes conn.
	dial *cluster.Dial
}

// create creates the copy's database (cluster.Locked.CreateMarkedDatabase) and keeps the session
// it opened ahead to it.
func (j *copyJob) create(ctx context.Context, l *cluster.Locked, name string, opts cluster.CreateOptions) (*cluster.DatabaseOutcome, error) {
	out, err := l.CreateMarkedDatabase(ctx, name, opts)
	if out != nil && out.Dial != nil {
		j.dial.Close(ctx)
		j.dial = out.Dial
	}
	return out, err
}

func (j *copyJob) close(ctx context.Context) {
	j.dump.stop()
	_, _ = j.total.wait()
	j.dial.Close(ctx)
	j.src.Close()
	j.dst.Close()
	if j.conn != nil {
		_ = j.conn.Close(context.WithoutCancel(ctx))
	}
}

// startCopy creates the copy's database; a schema_only copy does it holding its datatable's
// template lock, so that the template it copies cannot be rebuilt or dropped meanwhile.
func (s *Service) startCopy(ctx context.Context, rep request.Reporter, c Copy, it *planItem, plan *parentPlan,
	phases *phaseTimes) (*copyJob, error) {
	if it.Mode != ModeSchemaOnly {
		return s.createCopyDatabase(ctx, rep, c, it, plan, nil, phases)
	}
	// A build of the template in progress holds the lock for as long as a restore takes: the copy
	// does not wait for it and is restored from a dump instead. Another copy holds it briefly.
	resource := it.Source + "/" + it.Datatable
	held, err := lock.TryAcquire(ctx, s.cfg.Control, lock.ClassSchemaTemplate, resource)
	if err != nil {
		return nil, retryable(err)
	}
	if held == nil {
		var building bool
		if err := s.cfg.Control.QueryRow(ctx, `SELECT EXISTS (SELECT FROM dataenv.schema_templates
			WHERE workspace = $1 AND datatable = $2 AND state = 'building' AND spare_of IS NULL)`, it.Source, it.Datatable).Scan(&building); err != nil {
			return nil, retryable(err)
		}
		if building {
			return s.createCopyDatabase(ctx, rep, c, it, plan, nil, phases)
		}
		if held, err = lock.Acquire(ctx, s.cfg.Control, lock.ClassSchemaTemplate, resource, nil); err != nil {
			return nil, retryable(err)
		}
	}
	defer func() { _ = held.Release(ctx) }()
	ts, err := templatesOf(ctx, s.cfg.Control, it.Source, it.Datatable)
	if err != nil {
		return nil, err
	}
	phases.mark("template lock and list")
	return s.createCopyDatabase(ctx, rep, c, it, plan, ts, phases)
}

// loadAndFinish restores a dump-made copy, finishes it, and says what it kept.
func (s *Service) loadAndFinish(ctx context.Context, rep request.Reporter, step string, it *planItem, plan *parentPlan, job *copyJob,
	phases *phaseTimes) (*Fidelity, error) {
	var left []notCarried
	if job.method == MethodDump {
		total, err := job.total.wait()
		if err != nil {
			return nil, err
		}
		request.Report(ctx, rep, step, "loading", fmt.Sprintf("pg_dump %s (%s) of %s into %s (%s)", job.tools.Version, job.tools.Dir,
			it.ParentDatabase, it.Database, total))
		rj := restoreJob{schemaOnly: it.Mode == ModeSchemaOnly, tools: job.tools, src: job.src, dst: job.dst, dstDB: it.Database,
			leaveOut: plan.leaveOut(), started: job.dump, every: s.cfg.ProgressEvery, progress: func(p loadProgress) {
				request.Report(ctx, rep, step, "progress", total.progress(it.Mode, p))
			}, watch: s.watchLocks(it.Cluster, it.ParentDatabase), waiting: func(what string) {
				request.Report(ctx, rep, step, "waiting", what)
			}}
		if it.Mode == ModeFullCopy {
			rj.excludeData = plan.NoRowsPatterns
			left = append(left, plan.NoRows...)
		}
		out, err := s.restore(ctx, rj)
		if err != nil {
			return nil, err
		}
		left = append(append(left, out...), plan.adminMade()...)
		phases.mark("restore")
	}
	fj := finishJob{plan: plan, cluster: it.Cluster, database: it.Database, owner: job.owner, mode: it.Mode,
		databaseLevel: true, sequences: it.Mode == ModeSchemaOnly, phases: phases, conn: job.conn}
	switch job.method {
	case MethodTemplate, MethodClone:
		for _, o := range plan.OwnerRoles {
			if o.Name != job.owner {
				fj.reown = append(fj.reown, o.Name)
			}
		}
		left = append(left, plan.subscriptions()...)
	case MethodSchemaTemplate:
		if job.template.Owner != job.owner {
			fj.reown = []string{job.template.Owner}
		}
		if job.tookRole != "" {
			fj.reown, fj.dropRole = append(fj.reown, job.tookRole), job.tookRole
		}
		left = append(left, job.template.Report...)
	}
	more, err := s.finish(ctx, fj)
	if err != nil {
		return nil, err
	}
	return plan.fidelity(job, it.Mode, append(left, more...)), nil
}

// createCopyDatabase registers the copy and creates its database under the lifecycle lock, and
// for a dump returns the libpq environments of the parent (admin) and of the copy (owner).
// A schema_only copy passes its datatable's templates (ts): the current one is copied, if any.
func (s *Service) createCopyDatabase(ctx context.Context, rep request.Reporter, c Copy, it *planItem, plan *parentPlan,
	ts []schemaTemplate, phases *phaseTimes) (*copyJob, error) {
	job := &copyJob{}
	err := s.cfg.Clusters.WithLifecycleLock(ctx, c.Cluster, rep, func(ctx context.Context, l *cluster.Locked) error {
		phases.mark("lifecycle lock")
		// The session that creates the database opens while the registry row is written, if
		// the plan's read did not open it.
		maint := c.maint
		if maint == nil {
			maint = l.ConnectAhead(ctx, "")
		}
		defer maint.Close(ctx)
		l.UseSession(maint) // a role made here (no spare taken after all) is made on it
		if len(ts) > 0 {
			tplOwner, err := templateOwnerOf(ctx, l)
			if err != nil {
				return err
			}
			job.template = currentTemplate(ts, c.Cluster, c.ParentDatabase, plan.Fingerprint, tplOwner.Role)
			job.spare = readySpare(ts, job.template)
		}
		if err := registerCopy(ctx, l.Control(), c); err != nil {
			return err
		}
		var owner copyOwner
		var err error
		if job.spare != nil && job.spare.Role != "" && c.adopt != nil {
			job.adopt, job.owner = c.adopt, c.adopt.Role // made by taking the spare (createFromTemplate)
		} else {
			if owner, err = forkOwnerOf(ctx, l, c.Workspace, c.incarnation, c.Database); err != nil {
				return err
			}
			job.owner = owner.Role
		}
		phases.mark("registry row and owner")
		if err := s.createDatabase(ctx, l, c, plan, job, maint, func(detail string) {
			request.Report(ctx, rep, fmt.Sprintf("copy datatable %s (%s)", it.Datatable, it.Mode), "copying", detail)
		}); err != nil {
			return err
		}
		if job.adopt != nil { // the role the spare's became (or the one made when it was declined) converges
			if owner, err = forkOwnerOf(ctx, l, c.Workspace, c.incarnation, c.Database); err != nil {
				return err
			}
		}
		phases.mark("CREATE DATABASE, marked, renamed, recorded")
		copyConn := job.dial // opened as soon as the database had its name
		if job.dial = nil; copyConn == nil {
			copyConn = l.ConnectAhead(ctx, c.Database)
		}
		defer copyConn.Close(ctx)
		it.Method, it.CloneUnavailable = job.method, job.cloneUnavailable
		if _, err := l.Control().Exec(ctx, `UPDATE dataenv.fork_copies SET method = $3 WHERE cluster = $1 AND database = $2`,
			c.Cluster, c.Database, job.method); err != nil {
			return retryable(err)
		}
		if job.conn, err = copyConn.Conn(); err != nil {
			return err
		}
		phases.mark("method recorded, connected to the copy")
		if job.method != MethodDump {
			return nil
		}
		job.dst, err = owner.libpq(ctx, c.Database)
		return err
	})
	if err != nil {
		job.close(ctx)
		return nil, err
	}
	return job, nil
}

// createDatabase creates the copy's marked database, owned by job.owner and closed to PUBLIC
// until finish sets the parent's access list: a TEMPLATE copy of the current schema template
// (schema_only) or a copy of the parent (full_copy whose parent may be copied that way,
// templateOK: createFromParent), else an empty database with the parent's locale for dump and
// restore, once tools at least as new as the cluster's server are found (refused otherwise,
// before anything is created). A template copy refused meanwhile (a session connected, or the
// admin may not copy that database) falls back to the dump.
func (s *Service) createDatabase(ctx context.Context, l *cluster.Locked, c Copy, plan *parentPlan, job *copyJob, maint *cluster.Dial,
	report func(string)) error {
	conn, err := maint.Conn()
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// Every statement that makes the database runs on this one session to the maintenance
	// database, opened while the copy was registered.
	opts := cluster.CreateOptions{Request: c.Request, ForWorkspace: c.Workspace, Owner: job.owner, Private: true, Conn: conn,
		ConnectAhead: true}
	switch {
	case c.Mode == ModeSchemaOnly && job.template != nil:
		if err = s.createFromTemplate(ctx, l, c, opts, job, report); err == nil {
			return nil
		}
	case c.Mode == ModeFullCopy:
		if job.reason = plan.templateOK(); job.reason == "" {
			if err = s.createFromParent(ctx, l, c, opts, job, report); err == nil {
				return nil
			}
		}
	}
	if err != nil && !templateRefused(err) && !(c.Mode == ModeSchemaOnly && templateMissing(err)) {
		return err
	}
	if err != nil {
		s.log.Info("template copy refused; falling back to dump and restore", "database", c.Database, "error", err)
		job.reason, job.template, job.cloneUnavailable = "CREATE DATABASE ... TEMPLATE was refused: "+pgMessage(err), nil, ""
	}
	tools, err := s.toolsFor(ctx, plan)
	if err != nil {
		return request.Refusef("copy %s of cluster %q: %v", c.ParentDatabase, c.Cluster, err)
	}
	opts.Locale, opts.Prepare = &plan.Locale, plan.prepareFor(job.owner, c.Mode == ModeFullCopy)
	if err := startLoad(ctx, l, c, plan, job, tools); err != nil {
		return err
	}
	if _, err := job.create(ctx, l, c.Database, opts); err != nil {
		return err
	}
	job.method, job.tools = MethodDump, tools
	return nil
}

// startLoad starts what a copy by dump reads of the parent, so that it runs while the copy's
// empty database is created: pg_dump, whose catalog reads are most of a small parent's dump
// (its output waits in a pipe for the restore), and on a session of its own the total the
// restore's progress is reported against. The copy's job stops both if it ends before its load.
func startLoad(ctx context.Context, l *cluster.Locked, c Copy, plan *parentPlan, job *copyJob, tools pgtool.Set) error {
	src, err := l.Libpq(c.ParentDatabase)
	if err != nil {
		return err
	}
	job.src = src
	j := restoreJob{schemaOnly: c.Mode == ModeSchemaOnly, tools: tools, src: src}
	if c.Mode == ModeFullCopy {
		j.excludeData = plan.NoRowsPatterns
	}
	job.total = startTotal(ctx, l.ConnectAhead(ctx, c.ParentDatabase), c.ParentDatabase)
	job.dump, err = startDump(ctx, j)
	return err
}

// createFromTemplate makes a schema_only copy from the current schema template: its spare
// renamed, if it has a ready one (spare.go), else a TEMPLATE copy of it.
func (s *Service) createFromTemplate(ctx context.Context, l *cluster.Locked, c Copy, opts cluster.CreateOptions, job *copyJob,
	report func(string)) error {
	opts.Template = job.template.Database
	spare, err := claimSpare(ctx, l.Control(), job.spare, c.Request)
	if err != nil {
		return err
	}
	opts.Spare = spare
	switch {
	case spare != nil && spare.Role != "":
		// Its role becomes the workspace role (job.adopt), or keeps the objects until the finish
		// re-owns them (the workspace role exists).
		roleTo, how := job.owner, " with its role"
		if opts.Adopt = job.adopt; job.adopt == nil {
			opts.SpareRoleAs = names.TakenSpareRole(c.Workspace, c.Request.String(), c.Datatable)
			roleTo, how = opts.SpareRoleAs, "; its objects are re-owned to "+job.owner
		}
		report("ALTER DATABASE " + spare.Database + " RENAME TO " + c.Database + " and ALTER ROLE " + spare.Role + " RENAME TO " +
			roleTo + " (a spare TEMPLATE copy of " + job.template.Database + how + ")")
	case spare != nil:
		report("ALTER DATABASE " + spare.Database + " RENAME TO " + c.Database + " (a spare TEMPLATE copy of " + job.template.Database + ")")
	default:
		if err := makeOwner(ctx, l, c, job); err != nil {
			return err
		}
		report("CREATE DATABASE " + c.Database + " TEMPLATE " + job.template.Database)
	}
	out, err := job.create(ctx, l, c.Database, opts)
	if errors.Is(err, cluster.ErrSpareDeclined) {
		if err := makeOwner(ctx, l, c, job); err != nil {
			return err
		}
		opts.Spare, opts.Adopt = nil, nil
		report("CREATE DATABASE " + c.Database + " TEMPLATE " + job.template.Database + " (the spare was not there as recorded)")
		out, err = job.create(ctx, l, c.Database, opts)
	}
	if err != nil {
		return err
	}
	job.method = MethodSchemaTemplate
	if !out.FromSpare {
		return nil
	}
	job.tookSpare, job.tookRole = spare.Database, opts.SpareRoleAs
	return forgetSpare(ctx, l.Control(), spare, c.Cluster, c.Request)
}

// makeOwner makes the copy's owner, job.owner, when the copy was to make it by taking a spare
// with its role (job.adopt) and takes none after all; nothing when the owner exists.
func makeOwner(ctx context.Context, l *cluster.Locked, c Copy, job *copyJob) error {
	if job.adopt == nil {
		return nil
	}
	_, err := forkOwnerOf(ctx, l, c.Workspace, c.incarnation, c.Database)
	return err
}

// createFromParent copies an idle parent into the copy's database: by reflink clone where the
// cluster can (cluster.Locked.CanClone: PostgreSQL 18+, a data directory on a file system that
// clones), else by TEMPLATE; job.cloneUnavailable says why it did not clone. A clone that fails
// other than by being refused is made again by TEMPLATE. A refusal (templateRefused) is returned.
func (s *Service) createFromParent(ctx context.Context, l *cluster.Locked, c Copy, opts cluster.CreateOptions, job *copyJob,
	report func(string)) error {
	opts.Template = c.ParentDatabase
	ok, why, err := l.CanClone(ctx, opts.Conn) // the clone check's connection creates the copy too

	if err != nil {
		return err
	}
	if ok {
		copts := opts
		copts.Clone = true
		report("CREATE DATABASE " + c.Database + " TEMPLATE " + c.ParentDatabase + " STRATEGY FILE_COPY (file_copy_method = clone)")
		_, err := job.create(ctx, l, c.Database, copts)
		if err == nil || templateRefused(err) {
			job.method = MethodClone
			return err
		}
		why = "the clone failed (" + err.Error() + ")"
		s.log.Info("clone failed; copying by TEMPLATE", "database", c.Database, "error", err)
	}
	job.cloneUnavailable = why
	report("CREATE DATABASE " + c.Database + " TEMPLATE " + c.ParentDatabase)
	if _, err := job.create(ctx, l, c.Database, opts); err != nil {
		return err
	}
	job.method = MethodTemplate
	return nil
}

// toolsFor finds pg_dump and pg_restore at least as new as the plan's server.
func (s *Service) toolsFor(ctx context.Context, plan *parentPlan) (pgtool.Set, error) {
	return s.cfg.Tools.For(ctx, fmt.Sprintf("%d.%d", plan.serverNum/10000, plan.serverNum%10000))
}

// templateRefused: 55006 (the template has sessions) or 42501 (the admin may not clone it).
func templateRefused(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "55006" || pgErr.Code == "42501")
}

// templateMissing: 3D000, the template database does not exist. A schema template's ledger row
// may name a database that is gone (an older release left one after an interrupted drop): the
// copy is then restored from a dump, and the refresh it asks for builds the template again.
func templateMissing(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "3D000"
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

// copyTotal is what a dump and restore will load, read from the parent's catalog beforehand:
// its tables with data and their size on disk (not what the stream will be, but its scale).
type copyTotal struct {
	Tables, Bytes int64
	// Estimated: a table was locked, so Bytes is the catalog's count of pages (as of the last
	// VACUUM or ANALYZE) rather than the files' size, which waits for the lock.
	Estimated bool
}

// copyTablesSQL is the parent's tables a total counts (c; n their schema): its users' own, not
// an extension's.
const copyTablesSQL = `
  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
 WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_toast%'
   AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend d
                    WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objid = c.oid AND d.deptype = 'e')`

const copyTotalSQL = `
SELECT count(*), coalesce(sum(pg_catalog.pg_table_size(c.oid)), 0)::bigint` + copyTablesSQL

// copyEstimateSQL is copyTotalSQL from the catalog alone, which takes no lock.
const copyEstimateSQL = `
SELECT count(*), coalesce(sum((c.relpages::bigint + coalesce((SELECT t.relpages FROM pg_catalog.pg_class t WHERE t.oid = c.reltoastrelid), 0))
                              * pg_catalog.current_setting('block_size')::bigint), 0)::bigint` + copyTablesSQL

// totalLockTimeout is how long the total waits for a table's lock (pg_table_size takes one)
// before it estimates: the load's first step waits for the total, and pg_dump, which waits for
// the same lock, is better watched while it waits (lockWatch).
const totalLockTimeout = "200ms"

// totalReading is a copy's total being read on a session of the parent's own (startTotal).
type totalReading struct {
	done  chan struct{}
	total copyTotal
	err   error
}

// startTotal reads the total of database on parent, a session opened ahead, which it closes.
func startTotal(ctx context.Context, parent *cluster.Dial, database string) *totalReading {
	r := &totalReading{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		conn, err := parent.Conn()
		if err != nil {
			r.err = err
			return
		}
		defer conn.Close(context.WithoutCancel(ctx))
		if r.total, r.err = readTotal(ctx, conn); r.err != nil {
			r.err = retryable(fmt.Errorf("size up %q: %w", database, r.err))
		}
	}()
	return r
}

// readTotal reads the total on conn (a session of the total's own: it sets lock_timeout),
// estimated if a table is locked.
func readTotal(ctx context.Context, conn *pgx.Conn) (copyTotal, error) {
	var t copyTotal
	b := &pgx.Batch{}
	b.Queue("SET lock_timeout = '" + totalLockTimeout + "'")
	b.Queue(copyTotalSQL).QueryRow(func(row pgx.Row) error { return row.Scan(&t.Tables, &t.Bytes) })
	err := conn.SendBatch(ctx, b).Close()
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available
		t.Estimated = true
		err = conn.QueryRow(ctx, copyEstimateSQL).Scan(&t.Tables, &t.Bytes)
	}
	return t, err
}

// wait returns the total once read (none started: nil).
func (r *totalReading) wait() (copyTotal, error) {
	if r == nil {
		return copyTotal{}, nil
	}
	<-r.done
	return r.total, r.err
}

func (t copyTotal) String() string {
	if t.Estimated {
		return fmt.Sprintf("%d tables, about %s of table data on disk by the catalog's statistics: a table is locked", t.Tables, humanBytes(t.Bytes))
	}
	return fmt.Sprintf("%d tables, %s of table data on disk", t.Tables, humanBytes(t.Bytes))
}

// progress says how far a load is out of the total: tables for a full copy (pg_restore says
// when each table's data starts), the stream against the parent's table data.
func (t copyTotal) progress(mode string, p loadProgress) string {
	if mode == ModeSchemaOnly {
		return fmt.Sprintf("%s of schema streamed, %d tables in the parent", humanBytes(p.Bytes), t.Tables)
	}
	return fmt.Sprintf("table data %d/%d tables, %s streamed of about %s on disk, %d objects restored",
		p.Tables, t.Tables, humanBytes(p.Bytes), humanBytes(t.Bytes), p.Objects)
}
