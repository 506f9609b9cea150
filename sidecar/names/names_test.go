package names

import (
	"regexp"
	"strings"
	"testing"
)

var (
	identRE   = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)
	segmentRE = regexp.MustCompile(`^[a-z0-9_]+$`)
)

// Golden values: persisted state depends on them. A failure here means existing forks would lose
// their databases, schemas or files: add a new function instead of changing these.
func TestGoldenForkDatabase(t *testing.T) {
	golden(t, ForkDatabase, [][3]string{
		{"analytics", "orders", "dataenv_fork_analytics_orders_d23cc13a"},
		{"fork-a/b", "orders", "dataenv_fork_fork_a_b_orders_1d884dbb"},
		{"fork_a_b", "orders", "dataenv_fork_fork_a_b_orders_b004a982"},
		{"Dev.Team", "Sales-2024", "dataenv_fork_dev_team_sales_2024_649bc4ea"},
		{"a-very-long-workspace-identifier-for-feature-x", "a_long_datatable_name_here",
			"dataenv_fork_a_very_long_workspace_id_a_long_datatable_37e1d93a"},
		{"ws", "données", "dataenv_fork_ws_donn__es_1c88906f"},
	})
}

func TestGoldenForkLakeSchema(t *testing.T) {
	golden(t, ForkLakeSchema, [][3]string{
		{"analytics", "main", "dataenv_fork_analytics_main_4ba62a31"},
		{"fork-a/b", "main", "dataenv_fork_fork_a_b_main_c5561897"},
		{"fork_a_b", "main", "dataenv_fork_fork_a_b_main_c337ef00"},
		{"a-very-long-workspace-identifier-for-feature-x", "a_long_lake_name_here",
			"dataenv_fork_a_very_long_workspace_id_a_long_lake_name_618bdd25"},
	})
}

func TestGoldenAncestorAlias(t *testing.T) {
	golden(t, AncestorAlias, [][3]string{
		{"main", "analytics", "__dataenv_dl_main_analytics_20aae427"},
		{"main", "fork-a/b", "__dataenv_dl_main_fork_a_b_a2eb4f29"},
		{"__main__", "a__b", "__dataenv_dl_main_a_b_48979105"},
		{"___", "---", "__dataenv_dl_x_x_c8f2491b"},
	})
}

func TestGoldenSchemaTemplate(t *testing.T) {
	cases := [][4]string{
		{"analytics", "orders", "5b6c1d2e-0000-4000-8000-000000000001", "dataenv_tpl_analytics_orders_e885a44b"},
		{"a-very-long-workspace-identifier-for-feature-x", "a_long_datatable_name_here", "5b6c1d2e-0000-4000-8000-000000000002", "dataenv_tpl_a_very_long_workspace_id_a_long_datatable_9b576d3e"},
	}
	for _, c := range cases {
		got := SchemaTemplate(c[0], c[1], c[2])
		if got != c[3] {
			t.Errorf("SchemaTemplate(%q, %q, %q) = %q, golden %q", c[0], c[1], c[2], got, c[3])
		}
		if len(got) > MaxIdentifier || !identRE.MatchString(got) || !strings.HasPrefix(got, TemplatePrefix) {
			t.Errorf("SchemaTemplate(%q, %q, %q) = %q: too long, unprefixed or bad characters", c[0], c[1], c[2], got)
		}
	}
	if SchemaTemplate("ws", "t", "b1") == SchemaTemplate("ws", "t", "b2") || SchemaTemplate("a_b", "c", "x") == SchemaTemplate("a", "b_c", "x") {
		t.Error("schema template names collide")
	}
}

func TestGoldenForkData(t *testing.T) {
	cases := []struct{ ws, segment, path string }{
		{"analytics", "analytics_11b3057f", "s3://bucket/__dataenv_forks/analytics_11b3057f/lakes/main"},
		{"fork-a/b", "fork_a_b_534d2e19", "s3://bucket/__dataenv_forks/fork_a_b_534d2e19/lakes/main"},
		{"fork-a", "fork_a_6a8f2a82", "s3://bucket/__dataenv_forks/fork_a_6a8f2a82/lakes/main"},
	}
	for _, c := range cases {
		if got := ForkDataSegment(c.ws); got != c.segment {
			t.Errorf("ForkDataSegment(%q) = %q, golden %q", c.ws, got, c.segment)
		}
		if got := ForkDataPath("s3://bucket/", c.ws, "/lakes/main"); got != c.path {
			t.Errorf("ForkDataPath(%q) = %q, golden %q", c.ws, got, c.path)
		}
	}
	// A fork whose id extends a sibling's never lands inside the sibling's cleanup prefix.
	a, ab := ForkDataPrefix("file:///d", "fork-a"), ForkDataPrefix("file:///d", "fork-a/b")
	if strings.HasPrefix(ab, a) || strings.HasPrefix(a, ab) {
		t.Fatalf("prefixes nest: %q %q", a, ab)
	}
}

func golden(t *testing.T, f func(a, b string) string, cases [][3]string) {
	t.Helper()
	for _, c := range cases {
		if got := f(c[0], c[1]); got != c[2] {
			t.Errorf("(%q, %q) = %q, golden %q", c[0], c[1], got, c[2])
		}
	}
}

// Names that mangle alike still differ (the hash covers the unmangled inputs).
func TestInjectiveAfterMangling(t *testing.T) {
	pairs := [][2][2]string{
		{{"fork-a-b", "t"}, {"fork_a_b", "t"}},
		{{"fork-a/b", "t"}, {"fork-a_b", "t"}},
		{{"ws", "a-b"}, {"ws", "a_b"}},
		{{strings.Repeat("w", 30) + "1", "t"}, {strings.Repeat("w", 30) + "2", "t"}},
		{{"ws", strings.Repeat("t", 20) + "1"}, {"ws", strings.Repeat("t", 20) + "2"}},
		{{"a_b", "c"}, {"a", "b_c"}},
	}
	for _, p := range pairs {
		for name, f := range map[string]func(a, b string) string{"ForkDatabase": ForkDatabase, "ForkLakeSchema": ForkLakeSchema, "AncestorAlias": AncestorAlias} {
			if x, y := f(p[0][0], p[0][1]), f(p[1][0], p[1][1]); x == y {
				t.Errorf("%s: %v and %v both give %q", name, p[0], p[1], x)
			}
		}
	}
}

// checkNames asserts every property a name function promises for one input.
func checkNames(t *testing.T, ws, obj string) {
	for kind, n := range map[string]string{"database": ForkDatabase(ws, obj), "schema": ForkLakeSchema(ws, obj), "alias": AncestorAlias(obj, ws)} {
		if len(n) > MaxIdentifier || !identRE.MatchString(n) {
			t.Fatalf("%s name %q for (%q, %q): %d bytes or bad characters", kind, n, ws, obj, len(n))
		}
	}
	if n := ForkDatabase(ws, obj); !strings.HasPrefix(n, ForkPrefix) || n != ForkDatabase(ws, obj) {
		t.Fatalf("ForkDatabase(%q, %q) = %q: unstable or unprefixed", ws, obj, n)
	}
	a := AncestorAlias(obj, ws)
	if !strings.HasPrefix(a, AliasPrefix) || strings.Contains(a[2:], "__") {
		t.Fatalf("alias %q for (%q, %q) has \"__\" after its start", a, obj, ws)
	}
	seg := ForkDataSegment(ws)
	if strings.ContainsAny(seg, "/.") || seg == "" || len(seg) > MaxIdentifier || !segmentRE.MatchString(seg) {
		t.Fatalf("segment %q for %q is not one safe path component", seg, ws)
	}
	if p := ForkDataPath("s3://b", ws, obj); !strings.HasPrefix(p, "s3://b/"+ForkDataDir+"/"+seg+"/") {
		t.Fatalf("data path %q for (%q, %q) escapes the fork prefix", p, ws, obj)
	}
}

// The fuzz tests run their seed corpora as normal tests; `go test -fuzz=FuzzNames` explores.
func FuzzNames(f *testing.F) {
	for _, s := range [][2]string{{"", ""}, {"analytics", "orders"}, {"fork-a/b", "t"}, {"__", "__"},
		{"ÀÉÎ", "日本"}, {strings.Repeat("x", 200), strings.Repeat("y", 200)}, {"a\x00b", "c"}, {"__dataenv_dl_x", "_y_"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, ws, obj string) { checkNames(t, ws, obj) })
}

// Two different input pairs never give the same name unless their hashes collide; and no alias
// is a proper suffix of another.
func FuzzInjective(f *testing.F) {
	for _, s := range [][4]string{{"fork-a-b", "t", "fork_a_b", "t"}, {"a_b", "c", "a", "b_c"},
		{"x", "__dataenv_dl_a_b", "a", "b"}, {"main", "ws", "main", "ws2"}, {"", "a", "a", ""}} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, a1, b1, a2, b2 string) {
		if a1 == a2 && b1 == b2 {
			return
		}
		for kind, fn := range map[string]func(a, b string) string{"database": ForkDatabase, "schema": ForkLakeSchema, "alias": AncestorAlias} {
			x, y := fn(a1, b1), fn(a2, b2)
			if x == y {
				t.Fatalf("%s: (%q, %q) and (%q, %q) both give %q", kind, a1, b1, a2, b2, x)
			}
			if kind == "alias" && (strings.HasSuffix(x, y) || strings.HasSuffix(y, x)) {
				t.Fatalf("alias %q and %q: one is a suffix of the other", x, y)
			}
		}
		if a1 != a2 && ForkDataSegment(a1) == ForkDataSegment(a2) {
			t.Fatalf("segments of %q and %q are equal", a1, a2)
		}
	})
}

// The relative lake data prefix agrees with the absolute fork data path, and stays under the
// guard every delete checks.
func TestForkLakeDataPrefixAgreesWithForkDataPath(t *testing.T) {
	for _, ws := range []string{"dev", "feature/x", "a-b"} {
		want := strings.TrimPrefix(ForkDataPath("s3://b", ws, "lakes/main"), "s3://b/") + "/"
		if got := ForkLakeDataPrefix(ws, "/lakes/main/"); got != want {
			t.Errorf("ForkLakeDataPrefix(%q) = %q, want %q", ws, got, want)
		}
		if !strings.HasPrefix(ForkLakeDataPrefix(ws, "x"), ForkDataGuard(ws)) || strings.Count(ForkDataGuard(ws), "/") != 2 {
			t.Errorf("guard %q", ForkDataGuard(ws))
		}
	}
}

func TestGoldenWorkspaceRole(t *testing.T) {
	const inst = "8f0c6f52-3c1e-4b9a-9f43-0d5d1f2b7a10"
	cases := []struct{ inst, cluster, ws, want string }{
		{inst, "instance", "prod", "dataenv_ws_prod_4421fa6a"},
		{inst, "instance", "prod/dev", "dataenv_ws_prod_dev_1d8d67f3"},
		{inst, "instance", "prod_dev", "dataenv_ws_prod_dev_87956db3"},
		{inst, "ext", "prod", "dataenv_ws_prod_044faee2"},
		{"00000000-0000-0000-0000-000000000000", "instance", "prod", "dataenv_ws_prod_4c7ed54c"},
		{inst, "instance", "a-very-long-workspace-identifier-for-feature-x/and-more", "dataenv_ws_a_very_long_workspace_identifier_for_fea_6e7cb518"},
	}
	for _, c := range cases {
		if got := WorkspaceRole(c.inst, c.cluster, c.ws); got != c.want {
			t.Errorf("WorkspaceRole(%q, %q, %q) = %q, golden %q", c.inst, c.cluster, c.ws, got, c.want)
		}
	}
}

// Every input gives a valid role name of at most 63 bytes; distinct inputs give distinct names
// (the hash covers the unmangled inputs, each length-prefixed).
func FuzzWorkspaceRole(f *testing.F) {
	for _, s := range [][6]string{{"i", "c", "ws", "i", "c", "ws2"}, {"i", "c", "fork-a/b", "i", "c", "fork_a_b"},
		{"i", "c1", "w", "i", "c2", "w"}, {"i1", "c", "w", "i2", "c", "w"}, {"a", "bc", "w", "ab", "c", "w"},
		{"", "", "", "", "", "x"}, {"i", "c", strings.Repeat("z", 100), "i", "c", strings.Repeat("z", 99)}} {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5])
	}
	f.Fuzz(func(t *testing.T, i1, c1, w1, i2, c2, w2 string) {
		x := WorkspaceRole(i1, c1, w1)
		if len(x) > MaxIdentifier || !identRE.MatchString(x) || !strings.HasPrefix(x, WorkspaceRolePrefix) {
			t.Fatalf("WorkspaceRole(%q, %q, %q) = %q: too long, bad characters or unprefixed", i1, c1, w1, x)
		}
		if (i1 != i2 || c1 != c2 || w1 != w2) && x == WorkspaceRole(i2, c2, w2) {
			t.Fatalf("(%q, %q, %q) and (%q, %q, %q) both give %q", i1, c1, w1, i2, c2, w2, x)
		}
	})
}

func TestGoldenSpareRole(t *testing.T) {
	spare := SchemaTemplate("analytics", "orders", "5b6c1d2e-0000-4000-8000-000000000001/spare")
	got := SpareRole("analytics", spare)
	if len(got) > MaxIdentifier || !identRE.MatchString(got) || !strings.HasPrefix(got, SpareRolePrefix) {
		t.Errorf("SpareRole = %q: too long, unprefixed or bad characters", got)
	}
	long := SpareRole("a-very-long-workspace-identifier-for-feature-x", spare)
	if len(long) > 47 {
		t.Errorf("SpareRole of a long workspace = %q, longer than 47 bytes", long)
	}
	if got != "dataenv_spare_analytics_5adcf436" || long != "dataenv_spare_a_very_long_workspace_id_9c879eca" {
		t.Errorf("SpareRole = %q and %q, golden dataenv_spare_analytics_5adcf436 and dataenv_spare_a_very_long_workspace_id_9c879eca", got, long)
	}
	if got == SpareRole("analytics", spare+"x") || got == SpareRole("analytics_", spare) {
		t.Error("spare role names collide")
	}
}

func TestGoldenTakenSpareRole(t *testing.T) {
	got := TakenSpareRole("analytics-f1", "5b6c1d2e-0000-4000-8000-000000000001", "orders")
	if len(got) > MaxIdentifier || !identRE.MatchString(got) || !strings.HasPrefix(got, SpareRolePrefix) {
		t.Errorf("TakenSpareRole = %q: too long, unprefixed or bad characters", got)
	}
	if got != "dataenv_spare_analytics_f1_7d9648c4" {
		t.Errorf("TakenSpareRole = %q", got)
	}
	if got == TakenSpareRole("analytics-f1", "5b6c1d2e-0000-4000-8000-000000000001", "orders2") ||
		got == SpareRole("analytics-f1", "5b6c1d2e-0000-4000-8000-000000000001") {
		t.Error("taken spare role names collide")
	}
}

func TestDiscardedForkCopy(t *testing.T) {
	req := "5b6c1d2e-0000-4000-8000-000000000001"
	got := DiscardedForkCopy(strings.Repeat("w", 80), strings.Repeat("d", 40), req)
	if len(got) > MaxIdentifier || !identRE.MatchString(got) || !strings.HasPrefix(got, ForkPrefix) {
		t.Errorf("DiscardedForkCopy = %q: too long, unprefixed or bad characters", got)
	}
	if d := DiscardedForkCopy("analytics-f1", "orders", req); d == ForkDatabase("analytics-f1", "orders") ||
		d == DiscardedForkCopy("analytics-f1", "orders", "5b6c1d2e-0000-4000-8000-000000000002") {
		t.Error("discarded fork copy names collide")
	}
}
