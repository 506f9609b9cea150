package lake

import (
	"reflect"
	"testing"
)

// A pinned node defers only the tables it had at the pin (whatever their latest status), and a
// table it lacked there falls through to a farther owner; an unpinned node defers its
// materialized tables.
func TestDeferListAtPins(t *testing.T) {
	pin := int64(4)
	near := &ancestorNode{Alias: "near", Workspaces: []string{"a"}, Pin: &pin, AtPin: map[string]bool{"orders": true, "failed_later": true}}
	far := &ancestorNode{Alias: "far", Workspaces: []string{"prod"}}
	mats := map[string]map[string]materialization{
		"a": {
			"orders":       {Status: "materialized"},
			"failed_later": {Status: "failed"},
			"late":         {Status: "materialized"}, // made after the pin
		},
		"prod": {
			"late":   {Status: "materialized"},
			"events": {Status: "materialized"},
		},
	}
	var got []string
	for _, v := range deferList([]*ancestorNode{near, far}, mats, "fork") {
		got = append(got, v.Name+"<"+v.Owner)
	}
	want := []string{"events<far", "failed_later<near", "late<far", "orders<near"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("defer views %v, want %v", got, want)
	}
}

func TestPinOfAnyWorkspaceOfTheNode(t *testing.T) {
	n := &ancestorNode{Workspaces: []string{"a/shared", "a"}}
	if s, ok := n.pinOf(map[string]int64{"a": 7}); !ok || s != 7 {
		t.Fatalf("pinOf: %d %v", s, ok)
	}
	if _, ok := n.pinOf(map[string]int64{"prod": 7}); ok {
		t.Fatal("a pin of another namespace applied")
	}
}

func TestMaintenanceSQL(t *testing.T) {
	got := MaintenanceSQL(&Maintenance{Lake: "main", Expire: []int64{0, 2, 3}})
	want := `ATTACH 'ducklake://main' AS "__dataenv_maintain";
CALL ducklake_expire_snapshots('__dataenv_maintain', versions => [0, 2, 3]);
CALL ducklake_cleanup_old_files('__dataenv_maintain', cleanup_all => true);`
	if got != want {
		t.Fatalf("maintenance SQL:\n%s\nwant:\n%s", got, want)
	}
	if got := MaintenanceSQL(&Maintenance{Lake: "main"}); got != `ATTACH 'ducklake://main' AS "__dataenv_maintain";
CALL ducklake_cleanup_old_files('__dataenv_maintain', cleanup_all => true);` {
		t.Fatalf("nothing to expire: %s", got)
	}
}
