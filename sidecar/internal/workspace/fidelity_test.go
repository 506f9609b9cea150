package workspace

import (
	"slices"
	"strings"
	"testing"
)

// Settings are written back as pg_dumpall writes them: a list parameter element by element (a
// quoted element keeps its quotes' meaning), any other value as one literal.
func TestSetStatement(t *testing.T) {
	for setting, want := range map[string]string{
		`search_path=app, public`:            `ALTER DATABASE d SET "search_path" = 'app', 'public'`,
		`search_path="$user", "My Schema"`:   `ALTER DATABASE d SET "search_path" = '$user', 'My Schema'`,
		`search_path=""`:                     `ALTER DATABASE d SET "search_path" = ''`,
		`work_mem=8MB`:                       `ALTER DATABASE d SET "work_mem" = '8MB'`,
		`statement_timeout=30s`:              `ALTER DATABASE d SET "statement_timeout" = '30s'`,
		`app.tenant=it's`:                    `ALTER DATABASE d SET "app"."tenant" = 'it''s'`,
		`default_text_search_config=a.b, c`:  `ALTER DATABASE d SET "default_text_search_config" = 'a.b, c'`,
		`temp_tablespaces=a,"b ""x"" c",  d`: `ALTER DATABASE d SET "temp_tablespaces" = 'a', 'b "x" c', 'd'`,
	} {
		got, err := setStatement("ALTER DATABASE d", setting)
		if err != nil || got != want {
			t.Errorf("%s:\n got %s (%v)\nwant %s", setting, got, err, want)
		}
	}
	for _, bad := range []string{"no equals sign", "x; DROP=1", `"q"=1`} {
		if _, err := setStatement("ALTER DATABASE d", bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The mapping merges what it made equal; the diff grants what is missing, revokes what is extra,
// and handles the grant option alone.
func TestACLMappingAndDiff(t *testing.T) {
	m := func(r string) string {
		if r == "old" || r == "owner2" {
			return "new"
		}
		return r
	}
	parent := []aclItem{{"old", "old", "SELECT", false}, {"owner2", "old", "SELECT", true}, {"old", "reader", "SELECT", true},
		{"old", "PUBLIC", "USAGE", false}}
	got := mapItems(parent, m)
	want := []aclItem{{"new", "PUBLIC", "USAGE", false}, {"new", "new", "SELECT", true}, {"new", "reader", "SELECT", true}}
	if !slices.Equal(got, want) {
		t.Fatalf("mapped %v, want %v", got, want)
	}
	current := []aclItem{{"new", "new", "SELECT", false}, {"new", "reader", "SELECT", false}, {"new", "other", "INSERT", false}}
	c := diffItems(current, got)
	if len(c.grant) != 1 || c.grant[0].Grantee != "PUBLIC" || len(c.revoke) != 1 || c.revoke[0].Grantee != "other" ||
		len(c.grantOption) != 2 || len(c.revokeOption) != 0 {
		t.Fatalf("diff %+v", c)
	}
	stmts, err := grantStatements("TABLE app.t", "", "new", "privileges of table app.t", c)
	if err != nil {
		t.Fatal(err)
	}
	var sql []string
	for _, s := range stmts {
		sql = append(sql, s.Actor+": "+s.SQL)
	}
	wantSQL := []string{`new: REVOKE INSERT ON TABLE app.t FROM "other" CASCADE`, `new: GRANT USAGE ON TABLE app.t TO PUBLIC`,
		`new: GRANT SELECT ON TABLE app.t TO "new" WITH GRANT OPTION`, `new: GRANT SELECT ON TABLE app.t TO "reader" WITH GRANT OPTION`}
	if !slices.Equal(sql, wantSQL) {
		t.Fatalf("statements\n%s\nwant\n%s", strings.Join(sql, "\n"), strings.Join(wantSQL, "\n"))
	}
	if _, err := grantStatements("TABLE t", "", "new", "x", aclChange{grant: []aclItem{{"new", "r", "SELECT; DROP TABLE t", false}}}); err == nil {
		t.Fatal("an unknown privilege name reached a statement")
	}
}

// The restore's list leaves out what must be left out by catalog and OID (names in a listing can
// be anything), with the comments and publication memberships attached to it, nothing else.
func TestTOCWithout(t *testing.T) {
	listing := `;
; Archive created at 2026-12-01
3436; 6104 30507 PUBLICATION - p1 app
3437; 6104 30510 PUBLICATION - pall postgres
3447; 0 0 COMMENT - PUBLICATION pall postgres
;	depends on: 3437
3438; 6106 30508 PUBLICATION TABLE public p1 t app
;	depends on: 216 3436
3439; 6106 30509 PUBLICATION TABLE public pall t app
;	depends on: 216 3437
216; 1259 30504 TABLE public t app
3450; 1259 30600 TABLE public 6104 30510 PUBLICATION app
3293; 3466 30512 EVENT TRIGGER - et postgres
;	depends on: 262
`
	toc, err := parseTOC(listing)
	if err != nil {
		t.Fatal(err)
	}
	text, left := toc.without([]uncreatable{{Catalog: 6104, OID: 30510, notCarried: notCarried{Object: "publication pall"}},
		{Catalog: 3466, OID: 30512, notCarried: notCarried{Object: "event trigger et"}},
		{notCarried: notCarried{Object: "subscription s"}}})
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		if strings.HasPrefix(l, ";") {
			out = append(out, strings.Fields(strings.TrimPrefix(l, ";"))[0])
		}
	}
	if want := []string{"3437;", "3447;", "3439;", "3293;"}; !slices.Equal(out, want) {
		t.Fatalf("left out entries %v, want %v\n%s", out, want, text)
	}
	if len(left) != 3 || left[2].Object != "subscription s" {
		t.Fatalf("reported %v", left)
	}
}

// A failed restore's error is the object and PostgreSQL's message, not the progress lines.
func TestToolError(t *testing.T) {
	stderr := strings.Repeat("pg_restore: creating TABLE \"public.t\"\n", 100) + `pg_restore: while PROCESSING TOC:
pg_restore: from TOC entry 3437; 6104 30510 PUBLICATION pall postgres
pg_restore: error: could not execute query: ERROR:  must be superuser to create FOR ALL TABLES publication
Command was: CREATE PUBLICATION pall FOR ALL TABLES;
`
	got := toolError(stderr, "pg_restore")
	if !strings.HasPrefix(got, "PUBLICATION pall postgres (TOC entry 3437): could not execute query: ERROR:  must be superuser") ||
		strings.Contains(got, "creating TABLE") || !strings.Contains(got, "Command was: CREATE PUBLICATION") {
		t.Fatalf("error %q", got)
	}
}
