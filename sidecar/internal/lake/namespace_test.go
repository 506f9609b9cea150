package lake

import (
	"strings"
	"testing"

	"github.com/dataenv/dataenv/sidecar/internal/control"
	"github.com/dataenv/dataenv/sidecar/names"
)

func testLake() (control.Lake, control.Storage) {
	l := control.Lake{Workspace: "prod", Name: "main", CatalogCluster: "c", CatalogDatabase: "cat", Storage: "st", DataPath: "lakes/main",
		ExtraArgs: map[string]any{"ENCRYPTED": true, "METADATA_SCHEMA": "meta", "DATA_INLINING_ROW_LIMIT": float64(0)}}
	return l, control.Storage{Name: "st", URL: "s3://bucket"}
}

func render(opts []Option) string {
	parts := make([]string, len(opts))
	for i, o := range opts {
		parts[i] = o.String()
	}
	return strings.Join(parts, ", ")
}

// In an isolated fork, settings- and user-supplied namespace options are stripped and the
// fork's own come last (DuckDB keeps the last duplicate).
func TestForkWriteOptionsStripAndAppend(t *testing.T) {
	l, s := testLake()
	l.ForkBehavior = "isolated"
	ns := namespaceOf("dev", true, l, s)
	user := []Option{{"METADATA_SCHEMA", "'public'"}, {"DATA_PATH", "'s3://bucket/lakes/main/'"}, {"OVERRIDE_DATA_PATH", "TRUE"},
		{"META_SCHEMA", "'public'"}, {"READ_ONLY", ""}}
	got := render(ns.writeOptions(user))
	schema := names.ForkLakeSchema("dev", "main")
	want := "DATA_INLINING_ROW_LIMIT 0, ENCRYPTED TRUE, READ_ONLY, DATA_PATH 's3://bucket/" + names.ForkLakeDataPrefix("dev", "lakes/main") +
		"', METADATA_SCHEMA '" + schema + "', META_SCHEMA '" + schema + "'"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// A root keeps its METADATA_SCHEMA; the data path is dataenv's.
func TestRootWriteOptions(t *testing.T) {
	l, s := testLake()
	ns := namespaceOf("prod", false, l, s)
	got := render(ns.writeOptions([]Option{{"DATA_PATH", "'/elsewhere/'"}}))
	if want := "DATA_INLINING_ROW_LIMIT 0, ENCRYPTED TRUE, METADATA_SCHEMA 'meta', DATA_PATH 's3://bucket/lakes/main/', META_SCHEMA 'meta'"; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if ns.Forked || ns.SchemaName() != "meta" {
		t.Fatalf("root namespace %+v", ns)
	}
}

// An ancestor attach: its own non-reserved args first, READ_ONLY and the fork-owned options
// last, never AUTOMATIC_MIGRATION or CREATE_IF_NOT_EXISTS.
func TestAncestorReadOnlyOptions(t *testing.T) {
	l, s := testLake()
	l.ExtraArgs["AUTOMATIC_MIGRATION"] = true
	l.ExtraArgs["CREATE_IF_NOT_EXISTS"] = true
	got := render(namespaceOf("prod", false, l, s).readOnlyOptions())
	want := "DATA_INLINING_ROW_LIMIT 0, ENCRYPTED TRUE, DATA_PATH 's3://bucket/lakes/main/', OVERRIDE_DATA_PATH TRUE, READ_ONLY, METADATA_SCHEMA 'meta', META_SCHEMA 'meta'"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	shared := l
	shared.ForkBehavior = "shared"
	if ns := namespaceOf("backfill", true, shared, s); ns.Forked || ns.Key() != namespaceOf("prod", false, l, s).Key() {
		t.Fatal("a shared fork's namespace must be its parent's")
	}
}

// Views follow the nearest owner; a live view reading another ancestor is replaced.
func TestDeferViews(t *testing.T) {
	parent := &ancestorNode{Alias: names.AncestorAlias("main", "child"), Workspaces: []string{"child"}}
	root := &ancestorNode{Alias: names.AncestorAlias("main", "prod"), Workspaces: []string{"prod"}}
	mats := map[string]map[string]materialization{
		"prod":  {"a": {Status: "materialized"}, "b": {Status: "materialized"}, "c": {Status: "failed"}, "own": {Status: "materialized"}},
		"child": {"b": {Status: "materialized"}},
		"dev":   {"own": {Status: "failed", SnapshotID: new(int64)}},
	}
	views := deferList([]*ancestorNode{parent, root}, mats, "dev")
	var got []string
	for _, v := range views {
		got = append(got, v.Name+"<-"+v.Owner)
	}
	if want := "a<-" + root.Alias + " b<-" + parent.Alias; strings.Join(got, " ") != want {
		t.Fatalf("views %v, want %s", got, want)
	}
	live := map[string]string{"a": "SELECT * FROM " + root.Alias + ".a", "b": "SELECT * FROM " + root.Alias + ".b"}
	stmts := viewStatements("dl", views, live)
	if len(stmts) != 1 || !strings.HasPrefix(stmts[0], `CREATE OR REPLACE VIEW "dl"."b"`) {
		t.Fatalf("statements %v", stmts)
	}
	if d := targetDrops("dl", "a", live, nil); len(d) != 1 || d[0] != `DROP VIEW IF EXISTS "dl"."a"` {
		t.Fatalf("drops %v", d)
	}
	if d := targetDrops("dl", "own", live, views); len(d) != 0 {
		t.Fatalf("drops of a real table: %v", d)
	}
}

// The metadata catalog's attach is narrowed to the metadata schema (META_SCHEMA): DuckLake's
// default, public, when nothing names one; the schema a user's METADATA_SCHEMA names; and a
// user's own META_SCHEMA is left as it is.
func TestMetaSchemaNarrowsTheCatalogAttach(t *testing.T) {
	l, s := testLake()
	delete(l.ExtraArgs, "METADATA_SCHEMA")
	root := namespaceOf("prod", false, l, s)
	for _, tc := range []struct {
		name string
		got  string
		want string
	}{
		{"default", render(root.writeOptions(nil)), "DATA_INLINING_ROW_LIMIT 0, ENCRYPTED TRUE, DATA_PATH 's3://bucket/lakes/main/', META_SCHEMA 'public'"},
		{"user's metadata schema", render(root.writeOptions([]Option{{"METADATA_SCHEMA", "'mine'"}})),
			"DATA_INLINING_ROW_LIMIT 0, ENCRYPTED TRUE, METADATA_SCHEMA 'mine', DATA_PATH 's3://bucket/lakes/main/', META_SCHEMA 'mine'"},
		{"user's meta schema", render(root.writeOptions([]Option{{"meta_schema", "'theirs'"}})),
			"DATA_INLINING_ROW_LIMIT 0, ENCRYPTED TRUE, meta_schema 'theirs', DATA_PATH 's3://bucket/lakes/main/'"},
		{"ancestor", render(root.readOnlyOptions()),
			"DATA_INLINING_ROW_LIMIT 0, ENCRYPTED TRUE, DATA_PATH 's3://bucket/lakes/main/', OVERRIDE_DATA_PATH TRUE, READ_ONLY, META_SCHEMA 'public'"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s:\ngot  %s\nwant %s", tc.name, tc.got, tc.want)
		}
	}
}
