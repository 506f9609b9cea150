package grafana_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/dataenv/dataenv/grafana"
)

func TestDashboardLoads(t *testing.T) {
	d, err := grafana.LoadDashboard()
	if err != nil {
		t.Fatal(err)
	}
	if d.UID != "dataenv" {
		t.Errorf("uid %q, want dataenv (provisioning and links use it)", d.UID)
	}
	// The generic model: every panel has a unique id, a grid position and the datasource variable.
	var raw struct {
		Panels []map[string]any `json:"panels"`
	}
	if err := json.Unmarshal(grafana.DashboardJSON, &raw); err != nil {
		t.Fatal(err)
	}
	ids := map[float64]bool{}
	rows := 0
	for _, p := range raw.Panels {
		title, _ := p["title"].(string)
		id, _ := p["id"].(float64)
		if ids[id] {
			t.Errorf("panel %q: duplicate id %v", title, id)
		}
		ids[id] = true
		if _, ok := p["gridPos"].(map[string]any); !ok {
			t.Errorf("panel %q: no gridPos", title)
		}
		if p["type"] == "row" {
			rows++
			continue
		}
		ds, _ := p["datasource"].(map[string]any)
		if ds["uid"] != "${datasource}" {
			t.Errorf("panel %q: datasource %v, want the ${datasource} variable", title, ds)
		}
		if targets, _ := p["targets"].([]any); len(targets) == 0 {
			t.Errorf("panel %q has no queries", title)
		}
	}
	var titles []string
	for _, p := range d.Panels {
		if p.Type == "row" {
			titles = append(titles, p.Title)
		}
	}
	want := []string{"Overview", "Requests: clusters", "Requests: forks", "Requests: jobs", "Runner", "Sidecar process"}
	if !reflect.DeepEqual(titles, want) {
		t.Errorf("rows %v, want %v", titles, want)
	}
}

func TestAlertRulesAreComplete(t *testing.T) {
	var rg grafana.RuleGroups
	if err := yaml.Unmarshal(grafana.RulesYAML, &rg); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, g := range rg.Groups {
		for _, r := range g.Rules {
			seen[r.Alert] = true
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["runbook"] == "" {
				t.Errorf("alert %s needs a severity label and summary and runbook annotations", r.Alert)
			}
		}
	}
	for _, want := range []string{"DataenvNoLeader", "DataenvReplicationLagHigh", "DataenvRetainedWALHigh",
		"DataenvRequestsFailing", "DataenvRunnerCrashes"} {
		if !seen[want] {
			t.Errorf("alert %s missing", want)
		}
	}
}

func TestProvisioningFiles(t *testing.T) {
	var ds struct {
		APIVersion  int `yaml:"apiVersion"`
		Datasources []struct {
			Name, Type, UID, URL string
			IsDefault            bool `yaml:"isDefault"`
		} `yaml:"datasources"`
	}
	readYAML(t, "provisioning/datasources/prometheus.yml", &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].UID != "prometheus" {
		t.Errorf("datasources: %+v, want one prometheus datasource with uid prometheus", ds.Datasources)
	}
	var dp struct {
		Providers []struct {
			Name    string
			Type    string
			Options map[string]any
		} `yaml:"providers"`
	}
	readYAML(t, "provisioning/dashboards/dataenv.yml", &dp)
	if len(dp.Providers) != 1 || dp.Providers[0].Type != "file" || dp.Providers[0].Options["path"] == nil {
		t.Fatalf("dashboard providers: %+v, want one file provider with a path", dp.Providers)
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.FromSlash(path))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
