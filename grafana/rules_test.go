package grafana_test

import (
	"os/exec"
	"testing"
)

// TestPromtoolCheckRules runs Debian's promtool (package prometheus, installed by make deps).
func TestPromtoolCheckRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found (apt-get install prometheus, or make deps): %v", err)
	}
	out, err := exec.Command(promtool, "check", "rules", "alerts/dataenv.rules.yml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
