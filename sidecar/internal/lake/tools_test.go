package lake

import "testing"

func TestToolAliasAvoidsDuckDBReservedNames(t *testing.T) {
	for in, want := range map[string]string{"main": "main_lake", "temp": "temp_lake", "system": "system_lake", "memory": "memory_lake", "sales": "sales"} {
		if got := ToolAlias(in); got != want {
			t.Errorf("ToolAlias(%q) = %q, want %q", in, got, want)
		}
	}
	if got := ToolJobSQL([]string{"b", "main"}); got != `ATTACH 'ducklake://b' AS "b";`+"\n"+`ATTACH 'ducklake://main' AS "main_lake";` {
		t.Errorf("ToolJobSQL: %s", got)
	}
}

func TestKvBare(t *testing.T) {
	for in, want := range map[string]string{"lake_catalog": "lake_catalog", "disable": "disable", "a b": `'a b'`, "o'k": `'o\'k'`, "": `''`} {
		if got := kvBare(in); got != want {
			t.Errorf("kvBare(%q) = %s, want %s", in, got, want)
		}
	}
}
