package lake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/runner/protocol"
	"github.com/dataenv/dataenv/sidecar/internal/control"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// URL schemes the resolver rewrites in ATTACH statements.
const (
	SchemeLake      = "ducklake://"
	SchemeDatatable = "datatable://"
)

// TargetAlias is the alias of a materialize job's target lake when the query does not attach it.
const TargetAlias = "__dataenv_target"

// Resolver turns the ATTACH 'ducklake://<lake>' and ATTACH 'datatable://<name>' statements of a
// job into real attaches for the job's workspace. It is the one place every lake attach is
// resolved (run, materialize, any later preview): in an isolated fork it redirects writes to the
// fork's namespace, registers that namespace, and adds the read-defer prelude.
type Resolver struct {
	Control  *pgxpool.Pool
	Clusters Clusters
	Registry *Registry
	// Access gives the workspace's role what it needs in each lake namespace it attaches.
	Access *Access
	Logger *slog.Logger
}

// Target is the table a materialize job writes.
type Target struct {
	Lake, Table string
	// ReadFrom, when set, is a fork of the job's workspace whose namespace of Lake the job also
	// attaches READ_ONLY under SourceAlias (promote: the rows it copies into the target).
	ReadFrom string
}

// Plan is a resolved job.
type Plan struct {
	// Setup holds dataenv's own statements, to run before SQL and before the runner's sandbox
	// closes (protocol.Sandbox): the secrets, every ducklake:// and datatable:// attach of the
	// job (in the order the SQL has them, the materialize target first), the read-defer
	// prelude, then the drop of the postgres secrets.
	Setup []string
	// SQL is the job's own SQL without those attaches (NoStatement when nothing is left).
	SQL string
	// TargetAlias is the alias the target lake is attached under (materialize only).
	TargetAlias string
	// Target is the namespace written (materialize only).
	Target *Namespace
	// Source is the namespace attached under SourceAlias (Target.ReadFrom, promote only).
	Source *Namespace
	// TargetDrops turn the target from a defer view into room for a table: run them after the
	// query's rows are staged and before the table is written (materialize only).
	TargetDrops []string
	// TargetDefersTo is the ancestor workspace whose rows the fork reads through the target's
	// defer view ("" when the target is not one): what an append seeds the fork's table from.
	TargetDefersTo string
	// Notes are what a person may want to know (an ancestor skipped and why).
	Notes []string
	// LocalFiles is true when a lake of the job keeps its files on a file:// storage (outside a
	// jailed runner's mounts).
	LocalFiles bool
	// Dirs are the local data directories of the job's namespaces (file:// storages): the
	// workspace's own writable, its ancestors' read-only. A jailed runner sees only these.
	Dirs []Dir
	// Remote are the s3:// data prefixes of the job's namespaces.
	Remote []string
	// RemoteWrites are the prefixes of Remote the job may write (its own namespaces): with a
	// storage's read-only keys, only these get a secret with the read-write keys.
	RemoteWrites []string

	// Tools are the job's lake attaches as a member's own DuckDB session makes them
	// (dataenv.duckdb_script): the same namespaces, aliases and options, the tools' libpq path.
	Tools []ToolAttach

	secrets     []string
	toolSecrets []string
	catalogs    *catalogs
	// Probes are statements for the runner to run after Setup and before the job's SQL
	// (protocol.Request.Probes); Record reads their rows once the job is done.
	Probes []string
	// probed handles the rows of each of Probes; each returns a note ("" for none).
	probed []func(ctx context.Context, r protocol.Result) string
}

// ToolAttach is one attach of a member's DuckDB script.
type ToolAttach struct {
	Lake      string `json:"lake"`
	Alias     string `json:"alias"`
	Workspace string `json:"workspace"`
	ReadOnly  bool   `json:"read_only"`
	SQL       string `json:"-"`
	// Path is the ATTACH path for a dbt-duckdb profile; Options its options but READ_ONLY.
	Path    string   `json:"path"`
	Options []Option `json:"options"`
	// CertNote: the catalog's cluster has a root certificate the script does not name.
	CertNote bool `json:"cert_note,omitempty"`
}

// Dir is a local directory a job uses: a lake's data directory, or (Cert) one holding a
// catalog's root certificate, which libpq reads and the job's SQL may not.
type Dir struct {
	Path     string
	Writable bool
	Cert     bool
}

// NoStatement is the job SQL of a plan whose statements were all attaches: the empty result an
// ATTACH gives.
const NoStatement = `SELECT NULL::BOOLEAN AS "Success" WHERE false`

// AllowedDirectories are the data paths of the job's namespaces (local directories and s3://
// prefixes, each ending with "/"): all the runner's sandbox lets the job's SQL reach besides its
// scratch directory.
func (p *Plan) AllowedDirectories() []string {
	out := make([]string, 0, len(p.Dirs)+len(p.Remote))
	for _, d := range p.Dirs {
		if !d.Cert {
			out = append(out, strings.TrimSuffix(d.Path, "/")+"/")
		}
	}
	return append(out, p.Remote...)
}

// addDir records the data path of ns: a local directory (file:// storages), created so that it
// can be bound into a jail, or an s3:// prefix.
func (p *Plan) addDir(ns Namespace, writable bool) error {
	if ns.Storage.IsS3() {
		u := ns.DataURL()
		if writable && !slices.Contains(p.RemoteWrites, u) {
			p.RemoteWrites = append(p.RemoteWrites, u)
		}
		if !slices.Contains(p.Remote, u) {
			p.Remote = append(p.Remote, u)
		}
		return nil
	}
	dir := strings.TrimSuffix(ns.DataURL(), "/")
	for i, d := range p.Dirs {
		if d.Path == dir {
			p.Dirs[i].Writable = d.Writable || writable
			return nil
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("lake %q: data directory: %w", ns.Lake.Name, err)
	}
	p.Dirs = append(p.Dirs, Dir{Path: dir, Writable: writable})
	return nil
}

// Close releases what the plan holds (temporary root certificate files).
func (p *Plan) Close() {
	if p.catalogs != nil {
		p.catalogs.Close()
	}
}

// Scrub removes the plan's secrets from s (an error text or a result).
func (p *Plan) Scrub(s string) string {
	for _, sec := range p.secrets {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, "********")
		}
	}
	return s
}

// resolution is the state of one Resolve call.
type resolution struct {
	r        *Resolver
	ws       *control.Workspace
	lakes    map[string]map[string]control.Lake
	storages map[string]control.Storage
	// read are the storages read with the workspace (those of the chain's lakes)
	read   map[string]control.Storage
	cats   *catalogs
	plan   *Plan
	target *Target
	rep    request.Reporter
	// overlap: the records that may wait are left to the job's probes (ResolveRun)
	overlap bool
	// s3 storages that need a secret
	s3 map[string]control.Storage
}

// chain reads workspace id with its chain, the chain's lakes and their storages (one round
// trip), refusing a workspace that does not exist.
func (r *Resolver) chain(ctx context.Context, id string) (*control.Chain, error) {
	c, err := control.ReadChain(ctx, r.Control, id)
	if err != nil {
		if errors.Is(err, control.ErrNotFound) {
			return nil, request.Refusef("no workspace named %q", id)
		}
		return nil, request.Retryable(err)
	}
	return c, nil
}

// newResolution starts a resolution for the workspace of c: an empty plan that owns the
// catalogs' connections (Plan.Close).
func (r *Resolver) newResolution(c *control.Chain, target *Target, rep request.Reporter) *resolution {
	ws := c.Workspace
	res := &resolution{r: r, ws: ws, lakes: c.Lakes, storages: map[string]control.Storage{}, read: c.Storages,
		cats: newCatalogs(r.Clusters, ws.ID), plan: &Plan{}, target: target, rep: rep, s3: map[string]control.Storage{}}
	res.plan.catalogs = res.cats
	return res
}

// Resolve resolves sql for workspace. With target, the target lake is attached too (under the
// alias the SQL gives it, else TargetAlias) and its namespace prepared for the write.
func (r *Resolver) Resolve(ctx context.Context, workspace, sql string, target *Target, rep request.Reporter) (*Plan, error) {
	return r.resolve(ctx, workspace, sql, target, rep, false)
}

// ResolveRun is Resolve for a run job (no target) that leaves what does not shape the job to
// the job itself: the caller gives the runner Plan.Probes with the setup, and calls Plan.Record
// with what they found before it reads Plan.Notes or answers.
func (r *Resolver) ResolveRun(ctx context.Context, workspace, sql string, rep request.Reporter) (*Plan, error) {
	return r.resolve(ctx, workspace, sql, nil, rep, true)
}

func (r *Resolver) resolve(ctx context.Context, workspace, sql string, target *Target, rep request.Reporter, overlap bool) (*Plan, error) {
	c, err := r.chain(ctx, workspace)
	if err != nil {
		return nil, err
	}
	res := r.newResolution(c, target, rep)
	res.overlap = overlap
	if err := res.rewrite(ctx, sql); err != nil {
		res.plan.Close()
		return nil, err
	}
	res.plan.secrets = append(res.plan.secrets, res.cats.secrets...)
	setup := append([]string{}, res.cats.setup...)
	for _, d := range res.cats.certDirs {
		res.plan.Dirs = append(res.plan.Dirs, Dir{Path: d, Cert: true})
	}
	res.plan.toolSecrets = append([]string{}, res.cats.tools...)
	for _, s := range res.s3 {
		setup = append(setup, s3Secrets(s, res.plan.RemoteWrites)...)
		res.plan.toolSecrets = append(res.plan.toolSecrets, s3Secret(s, S3Placeholder(s.Name)))
		res.plan.secrets = append(res.plan.secrets, s.Creds.Secrets()...)
	}
	res.plan.Setup = append(append(setup, res.plan.Setup...), res.cats.drops()...)
	return res.plan, nil
}

// rewrite moves each ducklake:// and datatable:// ATTACH of sql, resolved, into the plan's setup
// (attaching the target lake first when the SQL does not), and leaves the rest as the job's SQL.
func (res *resolution) rewrite(ctx context.Context, sql string) error {
	stmts := SplitStatements(sql)
	out := make([]string, 0, len(stmts))
	var attaches []string
	targetAttached := false
	for _, st := range stmts {
		a, ok, err := ParseAttach(st)
		if err != nil {
			return request.Refusef("%v", err)
		}
		if !ok || !(strings.HasPrefix(a.Path, SchemeLake) || strings.HasPrefix(a.Path, SchemeDatatable)) {
			out = append(out, st)
			continue
		}
		if a.Alias == "" {
			return request.Refusef("ATTACH %s needs an alias: ATTACH %s AS x", Literal(a.Path), Literal(a.Path))
		}
		var text string
		if name, isLake := strings.CutPrefix(a.Path, SchemeLake); isLake {
			isTarget := res.target != nil && name == res.target.Lake && !targetAttached
			text, err = res.lakeAttach(ctx, name, a, isTarget)
			targetAttached = targetAttached || isTarget
		} else {
			text, err = res.datatableAttach(ctx, strings.TrimPrefix(a.Path, SchemeDatatable), a)
		}
		if err != nil {
			return err
		}
		attaches = append(attaches, text)
	}
	if res.target != nil && !targetAttached {
		a := &Attach{Path: SchemeLake + res.target.Lake, Alias: TargetAlias}
		text, err := res.lakeAttach(ctx, res.target.Lake, a, true)
		if err != nil {
			return err
		}
		attaches = append([]string{text}, attaches...)
	}
	if res.target != nil && res.target.ReadFrom != "" {
		text, err := res.sourceAttach(ctx)
		if err != nil {
			return err
		}
		attaches = append(attaches, text)
	}
	res.plan.Setup = attaches
	res.plan.SQL = NoStatement
	if len(out) > 0 {
		res.plan.SQL = strings.Join(out, ";\n") + ";"
	}
	return nil
}

// storage returns a storage by name (read once per job).
func (res *resolution) storage(ctx context.Context, name string) (control.Storage, error) {
	if s, ok := res.storages[name]; ok {
		return s, nil
	}
	s, ok := res.read[name]
	if !ok {
		var err error
		if s, err = control.ReadStorage(ctx, res.r.Control, name); err != nil {
			return s, err
		}
	}
	res.storages[name] = s
	if s.IsS3() {
		res.s3[name] = s
	} else {
		res.plan.LocalFiles = true
	}
	return s, nil
}

// lakeAttach resolves one ATTACH 'ducklake://<name>'.
func (res *resolution) lakeAttach(ctx context.Context, name string, a *Attach, isTarget bool) (string, error) {
	l, ok := res.lakes[res.ws.ID][name]
	if !ok {
		return "", request.Refusef("ATTACH %s: workspace %q has no lake named %q (SELECT name FROM dataenv.lake_info WHERE workspace = %s lists them)",
			Literal(a.Path), res.ws.ID, name, Literal(res.ws.ID))
	}
	s, err := res.storage(ctx, l.Storage)
	if err != nil {
		return "", err
	}
	ns := namespaceOf(res.ws.ID, res.ws.IsFork, l, s)
	if err := res.r.Registry.Register(ctx, ns, res.rep); err != nil {
		return "", err
	}
	cc, err := res.grantAndConnect(ctx, ns)
	if err != nil {
		return "", err
	}
	if err := res.plan.addDir(ns, !hasOption(a.Options, "READ_ONLY")); err != nil {
		return "", err
	}
	res.recordOwn(ctx, name, ns, a)
	var prelude []string
	toolsBefore := len(res.plan.Tools)
	if ns.Forked && !hasOption(a.Options, "READ_ONLY") {
		prelude, err = res.deferPrelude(ctx, ns, a.Alias, isTarget)
		if err != nil {
			return "", err
		}
	}
	if isTarget {
		res.plan.TargetAlias = a.Alias
		res.plan.Target = &ns
	}
	opts := append(ns.writeOptions(withoutOptions(a.Options, "META_SECRET")), Option{"META_SECRET", Literal(cc.Secret)})
	attach := Render(a.IfNotExists, "ducklake:postgres:"+cc.Path, a.Alias, opts)
	tool := ToolAttach{Lake: name, Alias: a.Alias, Workspace: res.ws.ID, ReadOnly: hasOption(a.Options, "READ_ONLY"),
		SQL: Render(a.IfNotExists, "ducklake:postgres:"+cc.ToolPath, a.Alias, opts), CertNote: cc.CertNote,
		Path: "ducklake:postgres:" + cc.DBTPath, Options: withoutOptions(opts, "READ_ONLY")}
	// The ancestors' attaches (added by deferPrelude) follow the lake's own.
	res.plan.Tools = append(res.plan.Tools[:toolsBefore], append([]ToolAttach{tool}, res.plan.Tools[toolsBefore:]...)...)
	return strings.Join(append([]string{attach}, prelude...), ";\n"), nil
}

// s3Keys are the key options of an S3 storage's DuckDB secret.
func s3Keys(s control.Storage) string {
	if s.Creds.AccessKeyID == "" {
		return "PROVIDER credential_chain"
	}
	return keyOptions(s.Creds.AccessKeyID, s.Creds.SecretAccessKey, s.Creds.SessionToken)
}

func keyOptions(id, secret, token string) string {
	keys := "KEY_ID " + Literal(id) + ", SECRET " + Literal(secret)
	if token != "" {
		keys += ", SESSION_TOKEN " + Literal(token)
	}
	return keys
}

// s3Secrets are a job's DuckDB secrets of S3 storage s. Without read-only keys, one secret with
// the storage's keys, scoped to its URL. With them, that secret holds the read-only keys, and the
// read-write keys are in one secret per prefix the job writes (writes, of every storage: those
// under s's URL count), scoped to it: DuckDB uses the secret with the longest matching scope, so
// the job writes its own namespaces and only reads its ancestors' files, whatever its SQL does.
func s3Secrets(s control.Storage, writes []string) []string {
	if !s.Creds.HasReadOnlyKeys() {
		return []string{s3Secret(s, s3Keys(s))}
	}
	ro := s3Secret(s, keyOptions(s.Creds.ReadOnlyAccessKeyID, s.Creds.ReadOnlySecretAccessKey, s.Creds.ReadOnlySessionToken))
	out := []string{ro}
	for _, w := range writes {
		if strings.HasPrefix(w, s.URL+"/") {
			name := fmt.Sprintf("__dataenv_s3_%s_w%d", s.Name, len(out))
			out = append(out, scopedS3Secret(s, name, w, s3Keys(s)))
		}
	}
	return out
}

// s3Secret is the DuckDB secret of an S3 storage, scoped to its URL, with keys (s3Keys, or the
// placeholder of a member's script).
func s3Secret(s control.Storage, keys string) string {
	return scopedS3Secret(s, "__dataenv_s3_"+s.Name, s.URL+"/", keys)
}

// scopedS3Secret is a DuckDB secret named name for storage s's endpoint, scoped to scope.
func scopedS3Secret(s control.Storage, name, scope, keys string) string {
	endpoint, ssl := s.Creds.HostPort()
	style := s.Creds.URLStyle
	if style == "" {
		style = "path"
	}
	opts := []string{"TYPE s3", "URL_STYLE " + Literal(style), fmt.Sprintf("USE_SSL %t", ssl), "SCOPE " + Literal(scope), keys}
	if s.Creds.Region != "" {
		opts = append(opts, "REGION "+Literal(s.Creds.Region))
	}
	if endpoint != "" {
		opts = append(opts, "ENDPOINT "+Literal(endpoint))
	}
	return fmt.Sprintf("CREATE OR REPLACE TEMPORARY SECRET %s (%s)", Ident(name), strings.Join(opts, ", "))
}
