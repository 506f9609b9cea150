package workspace

import (
	"slices"
	"strings"
	"testing"
)

func TestAdminExtensionOrder(t *testing.T) {
	cube := adminExtension{OID: 1, Name: "cube", Required: true}
	earth := adminExtension{OID: 2, Name: "earthdistance", Requires: []uint32{1}}
	gone := adminExtension{OID: 3, Name: "gone"}
	needsGone := adminExtension{OID: 4, Name: "needs_gone", Requires: []uint32{3}}
	bloom := adminExtension{OID: 5, Name: "bloom"}
	got := adminExtensionOrder([]adminExtension{earth, needsGone, cube, gone, bloom}, map[uint32]bool{3: true})
	var names []string
	for _, e := range got {
		names = append(names, e.Name)
	}
	// Required first; an extension the server lacks is dropped with what requires it.
	if want := []string{"cube", "earthdistance", "bloom"}; !slices.Equal(names, want) {
		t.Fatalf("order %v, want %v", names, want)
	}
}

func TestAdminExtensionStatements(t *testing.T) {
	comment := "spatial"
	exts := []adminExtension{
		{OID: 1, Name: "cube", Version: "1.5", Schema: "geo", SchemaOID: 20000, MakeSchema: true, SchemaComment: &comment},
		{OID: 2, Name: "earth distance", Version: "1.1", Schema: "geo", SchemaOID: 20000, MakeSchema: true, SchemaComment: &comment},
		{OID: 3, Name: "postgres_fdw", Version: "1.1", Schema: "public", SchemaOID: 2200, Wrappers: []string{"postgres_fdw"}},
	}
	got := strings.Join(adminExtensionStatements(exts, "ws role"), ";\n")
	want := strings.Join([]string{
		`CREATE SCHEMA IF NOT EXISTS "geo"`,
		`CREATE EXTENSION IF NOT EXISTS "cube" WITH SCHEMA "geo" VERSION '1.5'`,
		`COMMENT ON EXTENSION "cube" IS NULL`,
		`CREATE EXTENSION IF NOT EXISTS "earth distance" WITH SCHEMA "geo" VERSION '1.1'`,
		`COMMENT ON EXTENSION "earth distance" IS NULL`,
		`CREATE EXTENSION IF NOT EXISTS "postgres_fdw" WITH SCHEMA "public" VERSION '1.1'`,
		`COMMENT ON EXTENSION "postgres_fdw" IS NULL`,
		`GRANT USAGE ON FOREIGN DATA WRAPPER "postgres_fdw" TO "ws role"`,
		`COMMENT ON SCHEMA "geo" IS 'spatial'`,
		`ALTER SCHEMA "geo" OWNER TO "ws role"`,
	}, ";\n")
	if got != want {
		t.Fatalf("statements:\n%s\nwant:\n%s", got, want)
	}
}

// TestTOCWithoutAdminExtensions: what the admin made is left out silently, the rows of its
// configuration tables are left out and reported, and nothing else matches a rows entry.
func TestTOCWithoutAdminExtensions(t *testing.T) {
	list, err := parseTOC(`3; 2615 20000 SCHEMA - geo app
4; 3079 20001 EXTENSION - postgis
5; 0 0 COMMENT - EXTENSION postgis
; depends on: 4
6; 1259 20002 TABLE public places app
7; 0 20003 TABLE DATA public spatial_ref_sys postgres
8; 0 20002 TABLE DATA public places app
`)
	if err != nil {
		t.Fatal(err)
	}
	text, left := list.without([]uncreatable{
		{Catalog: catalogNamespace, OID: 20000, carried: true},
		{Catalog: catalogExtension, OID: 20001, carried: true},
		{OID: 20003, rows: true, notCarried: notCarried{Object: "rows of public.spatial_ref_sys"}},
	})
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		if strings.HasPrefix(l, ";") {
			out = append(out, strings.Fields(l)[0])
		}
	}
	if want := []string{";3;", ";4;", ";5;", ";7;"}; !slices.Equal(out, want) {
		t.Errorf("left out %v, want %v", out, want)
	}
	if len(left) != 1 || left[0].Object != "rows of public.spatial_ref_sys" {
		t.Errorf("reported %+v, want the configuration table's rows only", left)
	}
}
