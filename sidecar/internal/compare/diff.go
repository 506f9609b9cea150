package compare

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Object kinds of a catalog snapshot, in the order differences are listed.
const (
	KindTable      = "table"
	KindColumn     = "column"
	KindConstraint = "constraint"
	KindIndex      = "index"
	KindTrigger    = "trigger"
	KindView       = "view"
	KindFunction   = "function"
)

var kindOrder = map[string]int{KindTable: 0, KindColumn: 1, KindConstraint: 2, KindIndex: 3, KindTrigger: 4, KindView: 5, KindFunction: 6}

// Changes of a Difference.
const (
	Added   = "added"
	Removed = "removed"
	Changed = "changed"
)

// Object is one schema object of a database, as a snapshot of its catalog shows it.
type Object struct {
	Kind string
	// Name identifies the object within its kind: schema.table, schema.table.column,
	// schema.index, schema.table.constraint, schema.table.trigger, schema.function(args).
	Name string
	// Relation is the table or view the object belongs to (columns, constraints, indexes,
	// triggers); "" for tables, views and functions. A difference of an object whose relation
	// was added or removed is not listed: the relation's is.
	Relation string
	// Attrs are what is compared, in the order a change lists them.
	Attrs []Attr
}

// Attr is one compared property of an Object.
type Attr struct {
	Name  string
	Value string
}

// Difference is one object added, removed or changed in the fork.
type Difference struct {
	Kind   string `json:"kind"`
	Object string `json:"object"`
	Change string `json:"change"`
	Detail string `json:"detail,omitempty"`
}

// shortValue is the longest attribute value a detail shows; longer ones (function bodies, view
// definitions) are said to differ.
const shortValue = 160

// Diff lists what fork added, removed or changed against parent, ordered by kind and name.
// Objects are matched by (Kind, Name); a change lists the attributes that differ.
func Diff(parent, fork []Object) []Difference {
	type key struct{ kind, name string }
	index := func(objs []Object) map[key]Object {
		m := make(map[key]Object, len(objs))
		for _, o := range objs {
			m[key{o.Kind, o.Name}] = o
		}
		return m
	}
	p, f := index(parent), index(fork)
	gone := map[string]bool{} // relations added or removed: their parts are not listed
	for k := range f {
		if _, ok := p[k]; !ok && isRelation(k.kind) {
			gone[k.name] = true
		}
	}
	for k := range p {
		if _, ok := f[k]; !ok && isRelation(k.kind) {
			gone[k.name] = true
		}
	}
	var out []Difference
	for k, o := range f {
		old, ok := p[k]
		switch {
		case !ok && !gone[o.Relation]:
			out = append(out, Difference{Kind: o.Kind, Object: o.Name, Change: Added, Detail: describe(o)})
		case ok:
			if d := changes(old, o); d != "" {
				out = append(out, Difference{Kind: o.Kind, Object: o.Name, Change: Changed, Detail: d})
			}
		}
	}
	for k, o := range p {
		if _, ok := f[k]; !ok && !gone[o.Relation] {
			out = append(out, Difference{Kind: o.Kind, Object: o.Name, Change: Removed, Detail: describe(o)})
		}
	}
	slices.SortFunc(out, func(a, b Difference) int {
		return cmp.Or(cmp.Compare(kindOrder[a.Kind], kindOrder[b.Kind]), cmp.Compare(a.Object, b.Object),
			cmp.Compare(a.Change, b.Change))
	})
	return out
}

func isRelation(kind string) bool { return kind == KindTable || kind == KindView }

// describe summarizes an added or removed object by its short attributes.
func describe(o Object) string {
	var parts []string
	if o.Relation != "" && o.Kind != KindColumn {
		parts = append(parts, "on "+o.Relation)
	}
	for _, a := range o.Attrs {
		if a.Value != "" && isShort(a.Value) {
			parts = append(parts, a.Name+" "+a.Value)
		}
	}
	return strings.Join(parts, ", ")
}

// changes says which attributes differ between old and new ("" when none does).
func changes(old, new Object) string {
	was := map[string]string{}
	for _, a := range old.Attrs {
		was[a.Name] = a.Value
	}
	var parts []string
	seen := map[string]bool{}
	for _, a := range new.Attrs {
		seen[a.Name] = true
		if v := was[a.Name]; v != a.Value {
			parts = append(parts, attrChange(a.Name, v, a.Value))
		}
	}
	for _, a := range old.Attrs {
		if !seen[a.Name] && a.Value != "" {
			parts = append(parts, attrChange(a.Name, a.Value, ""))
		}
	}
	return strings.Join(parts, "; ")
}

func attrChange(name, old, new string) string {
	if !isShort(old) || !isShort(new) {
		return name + " differs"
	}
	return fmt.Sprintf("%s: %s → %s", name, orNone(old), orNone(new))
}

func isShort(v string) bool { return len(v) <= shortValue && !strings.Contains(v, "\n") }

func orNone(v string) string {
	if v == "" {
		return "none"
	}
	return v
}
