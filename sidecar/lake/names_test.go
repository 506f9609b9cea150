package lake

import (
	"strings"
	"testing"

	"github.com/dataenv/dataenv/sidecar/names"
)

// The lake helpers agree with sidecar/names (whose golden tests pin the names).
func TestNamesAgreeWithNamesPackage(t *testing.T) {
	for _, ws := range []string{"dev", "feature/x", "a-b"} {
		want := strings.TrimPrefix(names.ForkDataPath("s3://b", ws, "lakes/main"), "s3://b/") + "/"
		if got := ForkDataPrefix(ws, "/lakes/main/"); got != want {
			t.Errorf("ForkDataPrefix(%q) = %q, want %q", ws, got, want)
		}
		if !strings.HasPrefix(ForkDataPrefix(ws, "x"), ForkGuard(ws)) || strings.Count(ForkGuard(ws), "/") != 2 {
			t.Errorf("guard %q", ForkGuard(ws))
		}
	}
	if ForkMetadataSchema("dev", "main") != names.ForkLakeSchema("dev", "main") {
		t.Error("schema name differs")
	}
}
