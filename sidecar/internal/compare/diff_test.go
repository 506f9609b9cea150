package compare

import (
	"reflect"
	"strings"
	"testing"
)

func table(name string) Object {
	return Object{Kind: KindTable, Name: name, Attrs: []Attr{{"kind", "table"}, {"persistence", ""}}}
}

func column(table, col, typ, null, def string) Object {
	return Object{Kind: KindColumn, Name: table + "." + col, Relation: table,
		Attrs: []Attr{{"type", typ}, {"nullability", null}, {"default", def}, {"identity", ""}, {"generated", ""}}}
}

func part(kind, name, relation, def string) Object {
	return Object{Kind: kind, Name: name, Relation: relation, Attrs: []Attr{{"definition", def}}}
}

func body(kind, name, def string) Object {
	return Object{Kind: kind, Name: name, Attrs: []Attr{{"kind", kind}, {"definition", def}}}
}

// parentSchema is a small schema: two tables with columns, a constraint, an index, a trigger, a
// view and a function.
func parentSchema() []Object {
	return []Object{
		table("public.orders"),
		column("public.orders", "id", "bigint", "not null", ""),
		column("public.orders", "amount", "numeric(12,2)", "not null", "0"),
		part(KindConstraint, "public.orders.orders_pkey", "public.orders", "PRIMARY KEY (id)"),
		part(KindIndex, "public.orders_amount_idx", "public.orders", "CREATE INDEX orders_amount_idx ON public.orders USING btree (amount)"),
		part(KindTrigger, "public.orders.audit", "public.orders", "CREATE TRIGGER audit AFTER INSERT ON public.orders FOR EACH ROW EXECUTE FUNCTION public.audit()"),
		table("public.scratch"),
		column("public.scratch", "x", "integer", "nullable", ""),
		part(KindConstraint, "public.scratch.scratch_x_check", "public.scratch", "CHECK ((x > 0))"),
		body(KindView, "public.big_orders", " SELECT id\n   FROM public.orders\n  WHERE amount > 100;"),
		body(KindFunction, "public.audit()", "CREATE OR REPLACE FUNCTION public.audit()\n RETURNS trigger\n LANGUAGE plpgsql\nAS $$BEGIN RETURN NEW; END$$\n"),
	}
}

func TestDiffOfTheSameSchemaIsEmpty(t *testing.T) {
	if d := Diff(parentSchema(), parentSchema()); len(d) != 0 {
		t.Fatalf("Diff of a schema with itself: %v", d)
	}
	if d := Diff(nil, nil); len(d) != 0 {
		t.Fatalf("Diff of two empty schemas: %v", d)
	}
}

// A column, an index, a function and a view added, a table dropped: exactly those, and not the
// dropped table's columns or constraints.
func TestDiffListsAddedAndRemovedObjectsOnce(t *testing.T) {
	fork := []Object{}
	for _, o := range parentSchema() {
		if o.Name != "public.scratch" && o.Relation != "public.scratch" {
			fork = append(fork, o)
		}
	}
	fork = append(fork,
		column("public.orders", "note", "text", "nullable", ""),
		part(KindIndex, "public.orders_note_idx", "public.orders", "CREATE INDEX orders_note_idx ON public.orders USING btree (note)"),
		body(KindFunction, "public.total(bigint)", "CREATE OR REPLACE FUNCTION public.total(bigint)\n ..."),
		body(KindView, "public.notes", " SELECT note\n   FROM public.orders;"),
	)
	got := Diff(parentSchema(), fork)
	want := []Difference{
		{Kind: KindTable, Object: "public.scratch", Change: Removed, Detail: "kind table"},
		{Kind: KindColumn, Object: "public.orders.note", Change: Added, Detail: "type text, nullability nullable"},
		{Kind: KindIndex, Object: "public.orders_note_idx", Change: Added,
			Detail: "on public.orders, definition CREATE INDEX orders_note_idx ON public.orders USING btree (note)"},
		{Kind: KindView, Object: "public.notes", Change: Added, Detail: "kind view"},
		{Kind: KindFunction, Object: "public.total(bigint)", Change: Added, Detail: "kind function"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Diff:\n got %#v\nwant %#v", got, want)
	}
}

// The parts of a table the fork added are not listed either: the table is.
func TestDiffFoldsTheObjectsOfAnAddedTable(t *testing.T) {
	fork := append(parentSchema(), table("public.extra"), column("public.extra", "y", "text", "nullable", ""),
		part(KindIndex, "public.extra_y_idx", "public.extra", "CREATE INDEX extra_y_idx ON public.extra USING btree (y)"))
	got := Diff(parentSchema(), fork)
	if len(got) != 1 || got[0].Object != "public.extra" || got[0].Change != Added || got[0].Kind != KindTable {
		t.Fatalf("Diff: %v, want only table public.extra added", got)
	}
}

func TestDiffSaysWhatChanged(t *testing.T) {
	fork := parentSchema()
	fork[2] = column("public.orders", "amount", "numeric(14,2)", "nullable", "") // type, nullability, default
	fork[4] = part(KindIndex, "public.orders_amount_idx", "public.orders", "CREATE INDEX orders_amount_idx ON public.orders USING hash (amount)")
	fork[9] = body(KindView, "public.big_orders", " SELECT id\n   FROM public.orders\n  WHERE amount > 1000;")
	fork[10] = body(KindFunction, "public.audit()", "CREATE OR REPLACE FUNCTION public.audit()\n RETURNS trigger\n LANGUAGE plpgsql\nAS $$BEGIN RETURN NULL; END$$\n")
	got := Diff(parentSchema(), fork)
	want := []Difference{
		{Kind: KindColumn, Object: "public.orders.amount", Change: Changed,
			Detail: "type: numeric(12,2) → numeric(14,2); nullability: not null → nullable; default: 0 → none"},
		{Kind: KindIndex, Object: "public.orders_amount_idx", Change: Changed,
			Detail: "definition: CREATE INDEX orders_amount_idx ON public.orders USING btree (amount) → CREATE INDEX orders_amount_idx ON public.orders USING hash (amount)"},
		{Kind: KindView, Object: "public.big_orders", Change: Changed, Detail: "definition differs"},
		{Kind: KindFunction, Object: "public.audit()", Change: Changed, Detail: "definition differs"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Diff:\n got %#v\nwant %#v", got, want)
	}
}

// Functions are matched by signature: an overload is added, not a change.
func TestDiffMatchesFunctionsBySignature(t *testing.T) {
	fork := append(parentSchema(), body(KindFunction, "public.audit(integer)", "CREATE OR REPLACE FUNCTION public.audit(integer) ..."))
	got := Diff(parentSchema(), fork)
	if len(got) != 1 || got[0].Object != "public.audit(integer)" || got[0].Change != Added {
		t.Fatalf("Diff: %v, want public.audit(integer) added", got)
	}
}

// A table replaced by a view of the same name: the table removed (with its parts folded), the
// view added.
func TestDiffTableReplacedByView(t *testing.T) {
	var fork []Object
	for _, o := range parentSchema() {
		if o.Name != "public.scratch" && o.Relation != "public.scratch" {
			fork = append(fork, o)
		}
	}
	fork = append(fork, body(KindView, "public.scratch", " SELECT 1 AS x;"))
	got := Diff(parentSchema(), fork)
	var s []string
	for _, d := range got {
		s = append(s, d.Kind+" "+d.Object+" "+d.Change)
	}
	if strings.Join(s, "; ") != "table public.scratch removed; view public.scratch added" {
		t.Fatalf("Diff: %v", s)
	}
}
