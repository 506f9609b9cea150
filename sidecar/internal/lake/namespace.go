package lake

import (
	"strings"

	"github.com/dataenv/dataenv/sidecar/internal/control"
	"github.com/dataenv/dataenv/sidecar/names"
)

// Namespace is where one workspace's lake physically lives: a metadata schema in a catalog
// database and a data prefix in a storage.
type Namespace struct {
	Workspace string
	Lake      control.Lake
	Storage   control.Storage
	// Forked is true for an isolated fork: its own metadata schema and data prefix.
	Forked bool
	// MetadataSchema is the schema of DuckLake's tables; "" means DuckLake's default.
	MetadataSchema string
	// DataPrefix is the data path relative to the storage root, ending with "/".
	DataPrefix string
}

// Isolated reports whether lake l of workspace ws gets a namespace of its own: ws is a fork (an
// orphaned one too) and the lake was not stamped shared at fork creation.
func Isolated(ws control.Workspace, l control.Lake) bool {
	return ws.IsFork && l.ForkBehavior != "shared"
}

// namespaceOf is the namespace of lake l for a workspace that is a fork (isFork) or not.
func namespaceOf(workspace string, isFork bool, l control.Lake, s control.Storage) Namespace {
	ns := Namespace{Workspace: workspace, Lake: l, Storage: s}
	if isFork && l.ForkBehavior != "shared" {
		ns.Forked = true
		ns.MetadataSchema = names.ForkLakeSchema(workspace, l.Name)
		ns.DataPrefix = names.ForkLakeDataPrefix(workspace, l.DataPath)
		return ns
	}
	ns.MetadataSchema = stringArg(l.ExtraArgs, "METADATA_SCHEMA")
	ns.DataPrefix = strings.Trim(l.DataPath, "/") + "/"
	return ns
}

// SchemaName is the metadata schema as it exists in the catalog (DuckLake's default is public).
func (n Namespace) SchemaName() string {
	if n.MetadataSchema == "" {
		return "public"
	}
	return n.MetadataSchema
}

// DataURL is the namespace's data path as DuckDB's DATA_PATH: a local directory for a file://
// storage, an s3:// URL otherwise; always ending with "/".
func (n Namespace) DataURL() string {
	return strings.TrimPrefix(n.Storage.URL, "file://") + "/" + n.DataPrefix
}

// Key identifies the physical namespace (two workspaces may share one: a shared fork and its
// parent).
func (n Namespace) Key() string {
	return strings.Join([]string{n.Lake.CatalogCluster, n.Lake.CatalogDatabase, n.SchemaName(), n.Storage.URL, n.DataPrefix}, "\x00")
}

// reservedOptions are the ATTACH options that place a namespace: stripped from a fork's
// settings and from user SQL before dataenv appends its own (DuckDB keeps the last duplicate,
// so a leftover would escape the namespace).
var reservedOptions = []string{"METADATA_SCHEMA", "META_SCHEMA", "DATA_PATH", "OVERRIDE_DATA_PATH"}

// writeOptions are the ATTACH options of the namespace for the workspace's own (writable)
// attach: the lake's extra args, then the user's, then the namespace's own last.
func (n Namespace) writeOptions(user []Option) []Option {
	var opts []Option
	if n.Forked {
		opts = append(extraOptions(n.Lake.ExtraArgs, reservedOptions...), withoutOptions(user, reservedOptions...)...)
		return append(opts,
			Option{"DATA_PATH", Literal(n.DataURL())},
			Option{"METADATA_SCHEMA", Literal(n.MetadataSchema)},
			Option{"META_SCHEMA", Literal(n.MetadataSchema)})
	}
	opts = append(extraOptions(n.Lake.ExtraArgs, "DATA_PATH", "OVERRIDE_DATA_PATH"), withoutOptions(user, "DATA_PATH", "OVERRIDE_DATA_PATH")...)
	return withMetaSchema(append(opts, Option{"DATA_PATH", Literal(n.DataURL())}))
}

// withMetaSchema adds META_SCHEMA, the schema of the metadata catalog's own attach, when no
// option names one: the metadata schema the options name (the last METADATA_SCHEMA), else
// DuckLake's default, public. Without it DuckDB's postgres extension reads the catalog of every
// schema of the catalog database at each attach, where DuckLake only reads its metadata schema:
// measured on the runner bench's catalog, 17 ms a job against 4 with it.
func withMetaSchema(opts []Option) []Option {
	schema := Literal("public")
	for _, o := range opts {
		switch strings.ToUpper(o.Name) {
		case "META_SCHEMA":
			return opts
		case "METADATA_SCHEMA":
			schema = o.Value
		}
	}
	return append(opts, Option{"META_SCHEMA", schema})
}

// readOnlyOptions are the ATTACH options of an ancestor's namespace: its own non-reserved extra
// args first, then the fork-owned options (data path, override, READ_ONLY, schema). Never
// AUTOMATIC_MIGRATION or CREATE_IF_NOT_EXISTS: a fork job must not change an ancestor's lake.
func (n Namespace) readOnlyOptions() []Option {
	opts := extraOptions(n.Lake.ExtraArgs, append(reservedOptions, "READ_ONLY", "AUTOMATIC_MIGRATION", "CREATE_IF_NOT_EXISTS", "MIGRATE_IF_REQUIRED")...)
	opts = append(opts,
		Option{"DATA_PATH", Literal(n.DataURL())},
		Option{"OVERRIDE_DATA_PATH", "TRUE"},
		Option{"READ_ONLY", ""})
	if n.MetadataSchema != "" {
		opts = append(opts, Option{"METADATA_SCHEMA", Literal(n.MetadataSchema)})
	}
	return append(opts, Option{"META_SCHEMA", Literal(n.SchemaName())})
}
