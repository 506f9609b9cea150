// Package compose holds the production-like docker compose stack of dataenv. The test here
// validates the compose file and its companions without Docker: the files are parsed and
// cross-checked (services, ports, volumes, mounts), and Prometheus's configuration is checked by
// promtool with the rules file it loads.
package compose

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

type composeFile struct {
	Services map[string]service `yaml:"services"`
	Volumes  map[string]any     `yaml:"volumes"`
}

type service struct {
	Image       string    `yaml:"image"`
	Build       build     `yaml:"build"`
	Command     []string  `yaml:"command"`
	Environment yaml.Node `yaml:"environment"`
	Volumes     []string  `yaml:"volumes"`
	DependsOn   yaml.Node `yaml:"depends_on"`
}

type build struct {
	Context    string `yaml:"context"`
	Dockerfile string `yaml:"dockerfile"`
}

type promConfig struct {
	RuleFiles     []string `yaml:"rule_files"`
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		StaticConfigs []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
		DNSSDConfigs []struct {
			Names []string `yaml:"names"`
			Port  int      `yaml:"port"`
		} `yaml:"dns_sd_configs"`
	} `yaml:"scrape_configs"`
}

func load(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func loadCompose(t *testing.T) composeFile {
	var c composeFile
	load(t, "docker-compose.yml", &c)
	return c
}

// env reads a service's environment in either compose form (map or KEY=value list).
func env(t *testing.T, s service) map[string]string {
	t.Helper()
	out := map[string]string{}
	switch s.Environment.Kind {
	case 0:
	case yaml.MappingNode:
		if err := s.Environment.Decode(&out); err != nil {
			t.Fatal(err)
		}
	case yaml.SequenceNode:
		var list []string
		if err := s.Environment.Decode(&list); err != nil {
			t.Fatal(err)
		}
		for _, kv := range list {
			k, v, _ := strings.Cut(kv, "=")
			out[k] = v
		}
	default:
		t.Fatalf("environment: unexpected YAML kind %v", s.Environment.Kind)
	}
	return out
}

// mounts maps a service's container paths to their sources (named volume or host path).
func mounts(s service) map[string]string {
	out := map[string]string{}
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 {
			out[parts[1]] = parts[0]
		}
	}
	return out
}

func TestServicesExist(t *testing.T) {
	c := loadCompose(t)
	for _, name := range []string{"postgres", "s3", "sidecar", "prometheus", "grafana"} {
		if _, ok := c.Services[name]; !ok {
			t.Errorf("service %s missing", name)
		}
	}
}

func TestPostgresIsLogicalWithADataVolume(t *testing.T) {
	c := loadCompose(t)
	pg := c.Services["postgres"]
	if !strings.HasPrefix(pg.Image, "postgres:17") {
		t.Errorf("postgres image %q, want postgres:17", pg.Image)
	}
	if !containsArg(pg.Command, "wal_level=logical") {
		t.Errorf("postgres command %v lacks -c wal_level=logical", pg.Command)
	}
	src, ok := mounts(pg)["/var/lib/postgresql/data"]
	if !ok {
		t.Fatal("postgres has no volume on /var/lib/postgresql/data")
	}
	if _, named := c.Volumes[src]; !named {
		t.Errorf("postgres data volume %q is not a named volume of the file", src)
	}
}

func containsArg(cmd []string, arg string) bool {
	for i, a := range cmd {
		if a == arg && i > 0 && cmd[i-1] == "-c" {
			return true
		}
	}
	return false
}

func TestScrapeTargetMatchesSidecarListenPort(t *testing.T) {
	c := loadCompose(t)
	e := env(t, c.Services["sidecar"])
	_, port, err := net.SplitHostPort(e["DATAENV_HTTP_ADDR"])
	if err != nil {
		t.Fatalf("sidecar DATAENV_HTTP_ADDR %q: %v", e["DATAENV_HTTP_ADDR"], err)
	}
	if host, _, _ := net.SplitHostPort(e["DATAENV_HTTP_ADDR"]); host != "0.0.0.0" && host != "" {
		t.Errorf("sidecar listens on %q: Prometheus in another container cannot reach it", host)
	}
	var pc promConfig
	load(t, "prometheus/prometheus.yml", &pc)
	var targets []string
	for _, sc := range pc.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			targets = append(targets, st.Targets...)
		}
		for _, dns := range sc.DNSSDConfigs {
			for _, n := range dns.Names {
				targets = append(targets, net.JoinHostPort(n, strconv.Itoa(dns.Port)))
			}
		}
	}
	if len(targets) == 0 {
		t.Fatal("prometheus.yml scrapes nothing")
	}
	for _, target := range targets {
		host, tport, err := net.SplitHostPort(target)
		if err != nil {
			t.Fatalf("target %q: %v", target, err)
		}
		if _, ok := c.Services[host]; !ok {
			t.Errorf("target %q: no service %s", target, host)
		}
		if tport != port {
			t.Errorf("target %q: port %s, sidecar listens on %s", target, tport, port)
		}
	}
}

func TestSidecarBuildAndEntrypoint(t *testing.T) {
	c := loadCompose(t)
	sc := c.Services["sidecar"]
	e := env(t, sc)
	if !strings.Contains(e["DATAENV_DSN"], "@postgres:5432/") {
		t.Errorf("DATAENV_DSN %q does not point at the postgres service", e["DATAENV_DSN"])
	}
	root := filepath.Clean(sc.Build.Context)
	dockerfile := filepath.Join(root, sc.Build.Dockerfile)
	b, err := os.ReadFile(dockerfile)
	if err != nil {
		t.Fatalf("sidecar build: %v", err)
	}
	df := string(b)
	for _, want := range []string{
		"CGO_ENABLED=0 go build", "./sidecar/cmd/dataenv",
		"CGO_ENABLED=1 go build", "./runner/cmd/dataenv-runner",
		"postgresql-client", "COPY compose/entrypoint.sh",
	} {
		if !strings.Contains(df, want) {
			t.Errorf("%s lacks %q", dockerfile, want)
		}
	}
	for _, pkg := range []string{"sidecar/cmd/dataenv", "runner/cmd/dataenv-runner"} {
		if st, err := os.Stat(filepath.Join(root, pkg)); err != nil || !st.IsDir() {
			t.Errorf("Dockerfile builds ./%s, which does not exist: %v", pkg, err)
		}
	}
	ep, err := os.ReadFile("entrypoint.sh")
	if err != nil {
		t.Fatal(err)
	}
	install := strings.Index(string(ep), "\ndataenv install")
	sidecar := strings.Index(string(ep), "\nexec dataenv sidecar")
	if install < 0 || sidecar < 0 || install > sidecar {
		t.Errorf("entrypoint.sh must run `dataenv install` then `exec dataenv sidecar`")
	}
	if out, err := exec.Command("sh", "-n", "entrypoint.sh").CombinedOutput(); err != nil {
		t.Errorf("entrypoint.sh: %v: %s", err, out)
	}
}

func TestPrometheusLoadsTheRules(t *testing.T) {
	c := loadCompose(t)
	m := mounts(c.Services["prometheus"])
	if src := m["/etc/prometheus/prometheus.yml"]; filepath.Clean(src) != filepath.Join("prometheus", "prometheus.yml") {
		t.Errorf("prometheus.yml mounted from %q", src)
	}
	var pc promConfig
	load(t, "prometheus/prometheus.yml", &pc)
	var rulesSrc string
	for target, src := range m {
		for _, pattern := range pc.RuleFiles {
			if ok, _ := filepath.Match(pattern, target); ok {
				rulesSrc = src
			}
		}
	}
	if rulesSrc == "" {
		t.Fatalf("no mount matches rule_files %v (mounts %v)", pc.RuleFiles, m)
	}
	if _, err := os.Stat(rulesSrc); err != nil {
		t.Fatalf("rules mount source: %v", err)
	}
	promtoolCheckConfig(t, rulesSrc)
}

// promtoolCheckConfig checks prometheus.yml with promtool, its rule_files pointed at the rules file
// the compose stack mounts (promtool checks the rule files a configuration names too).
func promtoolCheckConfig(t *testing.T, rulesSrc string) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found (apt-get install prometheus, or make deps): %v", err)
	}
	b, err := os.ReadFile("prometheus/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(rulesSrc)
	if err != nil {
		t.Fatal(err)
	}
	conf := strings.ReplaceAll(string(b), "/etc/prometheus/rules/*.rules.yml", abs)
	path := filepath.Join(t.TempDir(), "prometheus.yml")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "config", path).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "rules found") {
		t.Errorf("promtool did not load the rules:\n%s", out)
	}
}

func TestGrafanaProvisioningMounts(t *testing.T) {
	c := loadCompose(t)
	m := mounts(c.Services["grafana"])
	wantSrc := map[string]string{
		"/etc/grafana/provisioning/datasources": "../grafana/provisioning/datasources",
		"/etc/grafana/provisioning/dashboards":  "../grafana/provisioning/dashboards",
	}
	for target, src := range wantSrc {
		if filepath.Clean(m[target]) != filepath.Clean(src) {
			t.Errorf("grafana mount %s from %q, want %q", target, m[target], src)
		}
	}
	var prov struct {
		Providers []struct {
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	load(t, "../grafana/provisioning/dashboards/dataenv.yml", &prov)
	if len(prov.Providers) == 0 {
		t.Fatal("no dashboard provider")
	}
	src, ok := m[prov.Providers[0].Options.Path]
	if !ok {
		t.Fatalf("dashboard provider reads %s, which grafana does not mount", prov.Providers[0].Options.Path)
	}
	if _, err := os.Stat(filepath.Join(src, "dataenv.json")); err != nil {
		t.Errorf("dashboards mount: %v", err)
	}
}
