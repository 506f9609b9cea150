package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
	"github.com/dataenv/dataenv/sidecar/internal/control"
	"github.com/dataenv/dataenv/sidecar/internal/crashpoint"
	"github.com/dataenv/dataenv/sidecar/internal/lock"
	"github.com/dataenv/dataenv/sidecar/internal/metrics"
	"github.com/dataenv/dataenv/sidecar/internal/request"
	"github.com/dataenv/dataenv/sidecar/names"
)

// KindRefreshSchemaTemplate builds, rebuilds or drops the schema template of a datatable entry.
const KindRefreshSchemaTemplate = "refresh_schema_template"

// Use kind of a schema template in dataenv.managed_database_uses (sqlapi/028_schema_templates.sql).
const UseSchemaTemplate = "schema template"

// schemaTemplate is a row of dataenv.schema_templates: a marked database with the schema of the
// database of datatable entry (Workspace, Datatable), without rows, owned by Owner, connections
// refused, from which schema_only forks are TEMPLATE copies while the parent's Fingerprint is
// unchanged. A row with SpareOf is a spare of that template (spare.go).
type schemaTemplate struct {
	Cluster, Database, Workspace, Datatable, ParentDatabase, Owner string
	Fingerprint, State                                             string
	Report                                                         []notCarried
	Request                                                        uuid.UUID
	SpareOf                                                        string
	// Role is a spare's own role, owner of its database and objects ("" for a template, and for a
	// spare made before spares had roles, whose objects are Owner's).
	Role string
}

// databaseOwner is the role that owns the template's database.
func (t *schemaTemplate) databaseOwner() string {
	if t.Role != "" {
		return t.Role
	}
	return t.Owner
}

const templateColumns = `cluster, database, workspace, datatable, parent_database, owner, coalesce(fingerprint, ''), state, report,
	created_by_request, coalesce(spare_of, ''), coalesce(role, '')`

func scanTemplate(row pgx.CollectableRow) (schemaTemplate, error) {
	var t schemaTemplate
	var report []byte
	if err := row.Scan(&t.Cluster, &t.Database, &t.Workspace, &t.Datatable, &t.ParentDatabase, &t.Owner, &t.Fingerprint,
		&t.State, &report, &t.Request, &t.SpareOf, &t.Role); err != nil {
		return t, err
	}
	return t, json.Unmarshal(report, &t.Report)
}

// templatesOf lists the registered templates of a datatable entry ("" datatable: of every entry
// of workspace).
func templatesOf(ctx context.Context, q querier, workspace, datatable string) ([]schemaTemplate, error) {
	rows, err := q.Query(ctx, `SELECT `+templateColumns+` FROM dataenv.schema_templates
		WHERE workspace = $1 AND ($2 = '' OR datatable = $2) ORDER BY created_at, database`, workspace, datatable)
	if err != nil {
		return nil, retryable(fmt.Errorf("read the schema templates of %s/%s: %w", workspace, datatable, err))
	}
	out, err := pgx.CollectRows(rows, scanTemplate)
	if err != nil {
		return nil, retryable(fmt.Errorf("read the schema templates of %s/%s: %w", workspace, datatable, err))
	}
	return out, nil
}

// currentTemplate is the ready template of the entry's database whose schema is the parent's now.
func currentTemplate(ts []schemaTemplate, clusterName, parent, fingerprint, owner string) *schemaTemplate {
	for i := range ts {
		t := &ts[i]
		if t.SpareOf == "" && t.State == StateReady && t.Cluster == clusterName && t.ParentDatabase == parent && t.Fingerprint == fingerprint &&
			t.Owner == owner && fingerprint != "" {
			return t
		}
	}
	return nil
}

// withTemplateLock holds the schema template lock of a datatable entry while fn runs: a fork
// copying from the template, a rebuild and a drop never interleave. Taken before any lifecycle
// lock.
func (s *Service) withTemplateLock(ctx context.Context, workspace, datatable string, fn func() error) error {
	return lock.With(ctx, s.cfg.Control, lock.ClassSchemaTemplate, workspace+"/"+datatable, nil,
		func(context.Context, *lock.Held) error { return fn() })
}

// templateRefreshSQL inserts a refresh_schema_template request for an entry ($2: workspace and
// datatable, as requested by $3), unless one is pending, and returns the request's id.
const templateRefreshSQL = `
WITH pending AS (SELECT id FROM dataenv.requests WHERE kind = $1 AND status = 'pending' AND args = $2::jsonb LIMIT 1),
     added AS (INSERT INTO dataenv.requests (kind, args, requested_by) SELECT $1, $2::jsonb, $3 WHERE NOT EXISTS (SELECT FROM pending)
               RETURNING id)
SELECT id::text FROM pending UNION ALL SELECT id::text FROM added`

// enqueueTemplateRefresh asks for a refresh of an entry's schema template in tx (templateRefreshSQL).
func enqueueTemplateRefresh(ctx context.Context, tx pgx.Tx, workspace, datatable, requestedBy string) (string, error) {
	var id string
	err := tx.QueryRow(ctx, templateRefreshSQL, KindRefreshSchemaTemplate, refreshArgs{workspace, datatable}, requestedBy).Scan(&id)
	return id, err
}

// queueTemplateRefresh is enqueueTemplateRefresh queued in a batch: its id is read in turn.
func queueTemplateRefresh(b *pgx.Batch, workspace, datatable, requestedBy string) {
	b.Queue(templateRefreshSQL, KindRefreshSchemaTemplate, refreshArgs{workspace, datatable}, requestedBy)
}

type refreshArgs struct {
	Workspace string `json:"workspace"`
	Datatable string `json:"datatable"`
}

// TemplateResult is the result of a refresh_schema_template request.
type TemplateResult struct {
	Workspace string `json:"workspace"`
	Datatable string `json:"datatable"`
	Status    string `json:"status"` // built, unchanged, dropped
	Database  string `json:"database,omitempty"`
	// Spare is the template's spare this request made (spare.go).
	Spare    string       `json:"spare,omitempty"`
	Dropped  []string     `json:"dropped,omitempty"`
	NotCarry []notCarried `json:"not_carried,omitempty"`
}

// handleRefreshTemplate: the entry exists (its own database, not an inherited one) → its
// template is made current, with a spare; the entry is gone → its templates are dropped. Either
// way the templates that are no longer current, and their spares, are dropped.
func (s *Service) handleRefreshTemplate(ctx context.Context, req *request.Request, rep request.Reporter) (any, error) {
	var args refreshArgs
	if err := request.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	var res *TemplateResult
	err := s.withTemplateLock(ctx, args.Workspace, args.Datatable, func() error {
		var err error
		res, err = s.refreshTemplate(ctx, req, rep, args)
		return err
	})
	s.count(metrics.OpSchemaTemplate, err == nil && res != nil && res.Status != "unchanged", err)
	if err != nil {
		s.log.Info("refresh_schema_template did not succeed", "workspace", args.Workspace, "datatable", args.Datatable, "error", err)
		return nil, err
	}
	return res, nil
}

func (s *Service) refreshTemplate(ctx context.Context, req *request.Request, rep request.Reporter, args refreshArgs) (*TemplateResult, error) {
	res := &TemplateResult{Workspace: args.Workspace, Datatable: args.Datatable, Status: "unchanged"}
	ts, err := templatesOf(ctx, s.cfg.Control, args.Workspace, args.Datatable)
	if err != nil {
		return nil, err
	}
	entry, err := control.ResolveDatatable(ctx, s.cfg.Control, args.Workspace, args.Datatable)
	gone := errors.Is(err, control.ErrNotFound) || (err == nil && (entry.ResolvedFrom != args.Workspace || entry.Fallback))
	if err != nil && !gone {
		return nil, retryable(err)
	}
	var keep, spare *schemaTemplate
	if !gone {
		ok, err := control.CanUse(ctx, s.cfg.Control, args.Workspace, req.RequestedBy)
		if err != nil {
			return nil, retryable(err)
		}
		if !ok {
			return nil, request.Refusef("refresh_schema_template: %s is not a member of workspace %q", req.RequestedBy, args.Workspace)
		}
		if keep, err = s.ensureTemplate(ctx, req, rep, entry, ts, res); err != nil {
			return nil, err
		}
		spare = readySpare(ts, keep)
	}
	for _, t := range ts {
		if (keep != nil && t.Database == keep.Database) || (spare != nil && t.Database == spare.Database) {
			continue
		}
		if err := s.dropTemplate(ctx, rep, t); err != nil {
			return nil, err
		}
		res.Dropped = append(res.Dropped, t.Database)
		if res.Status == "unchanged" {
			res.Status = "dropped"
		}
	}
	if keep != nil && spare == nil {
		if res.Spare, err = s.buildSpare(ctx, req, rep, keep); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// ensureTemplate returns the entry's current template, building one when there is none.
func (s *Service) ensureTemplate(ctx context.Context, req *request.Request, rep request.Reporter, entry control.Resolution,
	ts []schemaTemplate, res *TemplateResult) (*schemaTemplate, error) {
	// The build reads the entry's database as the cluster's admin: never one no binding may reach.
	if err := s.cfg.Clusters.CheckBindable(ctx, entry.Cluster, entry.Database); err != nil {
		return nil, fmt.Errorf("refresh_schema_template: %w", err)
	}
	plan, err := s.readParentPlan(ctx, entry.Cluster, entry.Database, ModeSchemaOnly)
	if err != nil {
		return nil, err
	}
	var owner copyOwner
	var current *schemaTemplate
	if err := s.cfg.Clusters.WithLifecycleLock(ctx, entry.Cluster, rep, func(ctx context.Context, l *cluster.Locked) error {
		if owner, err = templateOwnerOf(ctx, l); err != nil {
			return err
		}
		// A ready row whose database is gone (an older release could leave one after an
		// interrupted drop) is not current: a new template is built and the row dropped with
		// the others that are not kept.
		if t := currentTemplate(ts, entry.Cluster, entry.Database, plan.Fingerprint, owner.Role); t != nil {
			found, err := existsOnCluster(ctx, l, t.Database)
			if found {
				current = t
			}
			return err
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if current != nil {
		res.Database = current.Database
		return current, nil
	}
	t := &schemaTemplate{Cluster: entry.Cluster, Database: names.SchemaTemplate(entry.Workspace, entry.Datatable, req.ID.String()),
		Workspace: entry.Workspace, Datatable: entry.Datatable, ParentDatabase: entry.Database, Owner: owner.Role,
		Fingerprint: plan.Fingerprint, Request: req.ID}
	if err := s.buildTemplate(ctx, rep, t, plan); err != nil {
		return nil, err
	}
	res.Status, res.Database, res.NotCarry = "built", t.Database, t.Report
	return t, nil
}

// buildTemplate makes template t: registered (building) before its database exists; the marked,
// private database from template0 with the parent's locale; the parent's schema restored as the
// template's owner; privileges and default privileges set like the parent's (owners mapped to
// the template's owner); connections refused from then on (nobody can change it, and nothing
// connected ever blocks a TEMPLATE copy); then ready. A template of this request left building by
// an interruption is dropped and made again.
func (s *Service) buildTemplate(ctx context.Context, rep request.Reporter, t *schemaTemplate, plan *parentPlan) error {
	step := fmt.Sprintf("schema template of %s/%s", t.Workspace, t.Datatable)
	started := s.cfg.Now()
	prev, err := templatesOf(ctx, s.cfg.Control, t.Workspace, t.Datatable)
	if err != nil {
		return err
	}
	for _, p := range prev {
		if p.Database == t.Database { // this request's interrupted attempt
			if err := s.dropTemplate(ctx, rep, p); err != nil {
				return err
			}
		}
	}
	tools, err := s.toolsFor(ctx, plan)
	if err != nil {
		return request.Refusef("build the schema template of %s/%s: %v", t.Workspace, t.Datatable, err)
	}
	var src, dst *cluster.Libpq
	defer func() { src.Close(); dst.Close() }()
	err = s.cfg.Clusters.WithLifecycleLock(ctx, t.Cluster, rep, func(ctx context.Context, l *cluster.Locked) error {
		if _, err := l.Control().Exec(ctx, `INSERT INTO dataenv.schema_templates (cluster, database, workspace, datatable,
				parent_database, owner, fingerprint, created_by_request) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			t.Cluster, t.Database, t.Workspace, t.Datatable, t.ParentDatabase, t.Owner, t.Fingerprint, t.Request); err != nil {
			return retryable(fmt.Errorf("register schema template %q: %w", t.Database, err))
		}
		if _, err := l.CreateMarkedDatabase(ctx, t.Database, cluster.CreateOptions{Request: t.Request, ForWorkspace: t.Workspace,
			Owner: t.Owner, Locale: &plan.Locale, Private: true, Prepare: plan.prepareFor(t.Owner, false)}); err != nil {
			return err
		}
		owner, err := templateOwnerOf(ctx, l)
		if err != nil {
			return err
		}
		if src, err = l.Libpq(t.ParentDatabase); err != nil {
			return err
		}
		dst, err = owner.libpq(ctx, t.Database)
		return err
	})
	if err != nil {
		return err
	}
	crashpoint.HitOnce(CrashTemplateCreated)
	request.Report(ctx, rep, step, "loading", fmt.Sprintf("pg_dump %s (%s) --schema-only of %s into %s", tools.Version, tools.Dir,
		t.ParentDatabase, t.Database))
	left, err := s.restore(ctx, restoreJob{schemaOnly: true, tools: tools, src: src, dst: dst, dstDB: t.Database, leaveOut: plan.leaveOut(),
		every: s.cfg.ProgressEvery, progress: func(p loadProgress) {
			request.Report(ctx, rep, step, "progress", fmt.Sprintf("%s of schema streamed, %d objects restored", humanBytes(p.Bytes), p.Objects))
		}, watch: s.watchLocks(t.Cluster, t.ParentDatabase), waiting: func(what string) {
			request.Report(ctx, rep, step, "waiting", what)
		}})
	if err != nil {
		return fmt.Errorf("build the schema template of %s/%s: %w", t.Workspace, t.Datatable, err)
	}
	more, err := s.finish(ctx, finishJob{plan: plan, cluster: t.Cluster, database: t.Database, owner: t.Owner, mode: ModeSchemaOnly})
	if err != nil {
		return err
	}
	t.Report = append(append(left, plan.adminMade()...), more...)
	crashpoint.HitOnce(CrashTemplateLoaded)
	if err := s.closeTemplate(ctx, t); err != nil {
		return err
	}
	request.Report(ctx, rep, step, "done", fmt.Sprintf("%s in %s", t.Database, ms(s.cfg.Now().Sub(started))))
	return nil
}

// closeTemplate refuses connections to the template and marks it ready.
func (s *Service) closeTemplate(ctx context.Context, t *schemaTemplate) error {
	conn, err := s.cfg.Clusters.Connect(ctx, t.Cluster, "")
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+ident(t.Database)+" ALLOW_CONNECTIONS false"); err != nil {
		return retryable(fmt.Errorf("close schema template %q to connections: %w", t.Database, err))
	}
	report, err := json.Marshal(nonNil(t.Report))
	if err != nil {
		return err
	}
	if _, err := s.cfg.Control.Exec(ctx, `UPDATE dataenv.schema_templates SET state = 'ready', ready_at = now(), report = $3
		WHERE cluster = $1 AND database = $2`, t.Cluster, t.Database, report); err != nil {
		return retryable(fmt.Errorf("mark schema template %q ready: %w", t.Database, err))
	}
	t.State = StateReady
	return nil
}

func nonNil(l []notCarried) []notCarried {
	if l == nil {
		return []notCarried{}
	}
	return l
}

// dropTemplate drops a template's database (guarded: the template prefix, the record and the
// marker of the request that registered it, no use but its own), a spare's role, and then its
// row, under the cluster's lifecycle lock. The row is marked dropping first: an interrupted drop
// must not leave a ready row naming a database that is gone, which a later parent schema with
// the template's fingerprint would pick again. A template whose database was never created just
// loses its row.
func (s *Service) dropTemplate(ctx context.Context, rep request.Reporter, t schemaTemplate) error {
	if !strings.HasPrefix(t.Database, names.TemplatePrefix) {
		return request.Refusef("registry row names database %q, which is not a schema template (%s*); it is left alone", t.Database, names.TemplatePrefix)
	}
	err := s.cfg.Clusters.WithLifecycleLock(ctx, t.Cluster, rep, func(ctx context.Context, l *cluster.Locked) error {
		if _, err := l.Control().Exec(ctx, `UPDATE dataenv.schema_templates SET state = $4, taken_by_request = NULL
			WHERE cluster = $1 AND database = $2 AND created_by_request = $3`, t.Cluster, t.Database, t.Request, StateDropping); err != nil {
			return retryable(fmt.Errorf("mark schema template %q dropping: %w", t.Database, err))
		}
		c := Copy{Cluster: t.Cluster, Database: t.Database, Workspace: t.Workspace, Request: t.Request}
		rec, err := recordOf(ctx, l.Control(), c)
		if err != nil {
			return err
		}
		if rec == uuid.Nil {
			found, err := existsOnCluster(ctx, l, t.Database, stagingName(t.Request))
			if err != nil {
				return err
			}
			if found { // created, not recorded yet: adopt it through the cluster package, then drop it
				if _, err := l.CreateMarkedDatabase(ctx, t.Database, cluster.CreateOptions{Request: t.Request,
					ForWorkspace: t.Workspace, Owner: t.databaseOwner()}); err != nil {
					return fmt.Errorf("adopt the interrupted schema template %q before dropping it: %w", t.Database, err)
				}
				rec = t.Request
			}
		}
		if rec != uuid.Nil {
			if rec != t.Request {
				return request.Refusef("database %q was created by request %s, not by %s that registered the schema template; it is left alone",
					t.Database, rec, t.Request)
			}
			if _, err := l.DropMarkedDatabase(ctx, t.Database, cluster.DropOptions{TerminateSessions: true,
				Exempt: []cluster.Use{{Kind: UseSchemaTemplate, Name: t.Workspace + "/" + t.Datatable}}}); err != nil {
				return err
			}
		}
		if t.Role != "" { // after its database: the role owns the spare's objects
			if err := l.DropSpareRole(ctx, t.Role, t.Request); err != nil {
				return err
			}
		}
		crashpoint.HitOnce(CrashTemplateDropped)
		_, err = l.Control().Exec(ctx, `DELETE FROM dataenv.schema_templates WHERE cluster = $1 AND database = $2 AND created_by_request = $3`,
			t.Cluster, t.Database, t.Request)
		if err != nil {
			return retryable(fmt.Errorf("remove the registry row of schema template %q: %w", t.Database, err))
		}
		return nil
	})
	if err == nil {
		request.Report(ctx, rep, "drop schema template "+t.Database, "dropped", "of "+t.Workspace+"/"+t.Datatable)
	}
	return err
}

// dropTemplatesOf drops every template of workspace's entries (drop_fork, and a previous
// incarnation's leftovers), each under its entry's template lock.
func (s *Service) dropTemplatesOf(ctx context.Context, rep request.Reporter, workspace string) error {
	ts, err := templatesOf(ctx, s.cfg.Control, workspace, "")
	if err != nil {
		return err
	}
	return s.dropTemplates(ctx, rep, ts)
}

// dropTemplates drops templates ts, each under its entry's template lock.
func (s *Service) dropTemplates(ctx context.Context, rep request.Reporter, ts []schemaTemplate) error {
	var errs []error
	for _, t := range ts {
		err := s.withTemplateLock(ctx, t.Workspace, t.Datatable, func() error { return s.dropTemplate(ctx, rep, t) })
		if err != nil {
			errs = append(errs, fmt.Errorf("schema template %s: %w", t.Database, err))
		}
	}
	return errors.Join(errs...)
}
