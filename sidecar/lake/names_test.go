package lake

import (
	"strings"
	"testing"
)

func TestNamesGolden(t *testing.T) {
	golden := []struct{ got, want string }{
		{ForkMetadataSchema("dev-alice", "main"), "dataenv_fork_dev_alice_main_"},
		{ForkSegment("feature/x"), "feature_x_"},
		{AncestorAlias("main", "prod"), "__dataenv_dl_main_prod_"},
	}
	for _, g := range golden {
		if !strings.HasPrefix(g.got, g.want) || len(g.got) != len(g.want)+8 {
			t.Errorf("name %q: want %q + 8 hex", g.got, g.want)
		}
	}
	// Pinned in full: persisted state depends on these exact values.
	pinned := map[string]string{
		ForkMetadataSchema("dev-alice", "main"): "dataenv_fork_dev_alice_main_89f7efaa",
		ForkSegment("feature/x"):               "feature_x_022c2204",
		AncestorAlias("main", "prod"):          "__dataenv_dl_main_prod_2cf06f9a",
	}
	for got, want := range pinned {
		if got != want {
			t.Errorf("name changed: got %q, pinned %q", got, want)
		}
	}
}

func TestNamesInjectiveAfterMangling(t *testing.T) {
	pairs := [][2]string{{"a-b", "a_b"}, {"A", "a"}, {"a/b", "a_b"}, {"x" + strings.Repeat("y", 100), "x" + strings.Repeat("y", 99) + "z"}}
	for _, p := range pairs {
		if ForkMetadataSchema(p[0], "l") == ForkMetadataSchema(p[1], "l") {
			t.Errorf("schema collision for %q and %q", p[0], p[1])
		}
		if ForkSegment(p[0]) == ForkSegment(p[1]) {
			t.Errorf("segment collision for %q and %q", p[0], p[1])
		}
		if AncestorAlias("l", p[0]) == AncestorAlias("l", p[1]) {
			t.Errorf("alias collision for %q and %q", p[0], p[1])
		}
	}
}

func FuzzNames(f *testing.F) {
	for _, s := range []string{"", "a", "wm-fork-a/b", "ÄÖ__x", strings.Repeat("z", 300), "__dataenv_dl_x"} {
		f.Add(s, "main")
	}
	f.Fuzz(func(t *testing.T, ws, lake string) {
		s := ForkMetadataSchema(ws, lake)
		a := AncestorAlias(lake, ws)
		seg := ForkSegment(ws)
		for _, n := range []string{s, a} {
			if len(n) > 63 {
				t.Fatalf("%q is %d bytes", n, len(n))
			}
		}
		if !strings.HasPrefix(s, ForkSchemaPrefix) || strings.Contains(s[len(ForkSchemaPrefix):], "__") {
			t.Fatalf("schema %q", s)
		}
		if strings.Contains(a[len(AncestorAliasPrefix):], "__") || strings.Contains(seg, "/") || strings.Contains(seg, "__") {
			t.Fatalf("alias %q segment %q", a, seg)
		}
		for _, r := range s + a + seg {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
				t.Fatalf("character %q in %q %q %q", r, s, a, seg)
			}
		}
	})
}
