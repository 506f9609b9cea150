package lake

import (
	"reflect"
	"testing"
)

func TestSplitStatements(t *testing.T) {
	sql := "SELECT 'a;b'; -- c;d\nSELECT \"x;\" FROM t /* ; */; SELECT $$;$$;;  \n"
	got := SplitStatements(sql)
	want := []string{"SELECT 'a;b'", " -- c;d\nSELECT \"x;\" FROM t /* ; */", " SELECT $$;$$"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

func TestParseAttach(t *testing.T) {
	a, ok, err := ParseAttach(" attach database if not exists 'ducklake://main' AS \"Dl\" (METADATA_SCHEMA 'public', read_only, DATA_PATH 's3://x/''y')")
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	want := &Attach{IfNotExists: true, Path: "ducklake://main", Alias: "Dl", Options: []Option{
		{"METADATA_SCHEMA", "'public'"}, {"READ_ONLY", ""}, {"DATA_PATH", "'s3://x/''y'"}}}
	if !reflect.DeepEqual(a, want) {
		t.Fatalf("got %+v\nwant %+v", a, want)
	}
	if _, ok, _ := ParseAttach("SELECT 1"); ok {
		t.Fatal("SELECT parsed as ATTACH")
	}
	if _, _, err := ParseAttach("ATTACH 'ducklake://x' AS"); err == nil {
		t.Fatal("missing alias accepted")
	}
	got := Render(false, "ducklake:postgres:dbname=x", "dl", withoutOptions(a.Options, "DATA_PATH", "METADATA_SCHEMA"))
	if got != `ATTACH 'ducklake:postgres:dbname=x' AS "dl" (READ_ONLY)` {
		t.Fatal(got)
	}
}

func FuzzParseAttach(f *testing.F) {
	for _, s := range []string{"ATTACH 'ducklake://x' AS y (A 1, B 'c', READ_ONLY)", "attach if not exists 'a''b' as \"q\"", "ATTACH 'x' AS y (", "ATTACH $$x$$", "SELECT ';'; ATTACH"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		for _, st := range SplitStatements(sql) {
			a, ok, err := ParseAttach(st)
			if ok && err == nil && a != nil && a.Alias != "" {
				// A rendered attach parses back to the same path, alias and options.
				b, ok2, err2 := ParseAttach(Render(a.IfNotExists, a.Path, a.Alias, a.Options))
				if !ok2 || err2 != nil || b.Path != a.Path || b.Alias != a.Alias || len(b.Options) != len(a.Options) {
					t.Fatalf("round trip of %q: %+v %v %v", st, b, ok2, err2)
				}
			}
		}
	})
}
