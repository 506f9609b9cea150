// Package grafana holds dataenv's observability assets: the Grafana dashboard
// (dashboards/dataenv.json), its provisioning files and the Prometheus alerting rules
// (alerts/dataenv.rules.yml). It embeds the dashboard and the rules and lists every PromQL
// expression in them, so tests can check the expressions against the metrics the sidecar exports
// and evaluate them on a real Prometheus.
package grafana

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// DashboardJSON is grafana/dashboards/dataenv.json.
//
//go:embed dashboards/dataenv.json
var DashboardJSON []byte

// RulesYAML is grafana/alerts/dataenv.rules.yml, the Prometheus alerting rules.
//
//go:embed alerts/dataenv.rules.yml
var RulesYAML []byte

// Query is one PromQL expression and where it comes from.
type Query struct {
	Source string // e.g. `panel "Throughput by outcome" A` or `alert DataenvNoLeader`
	Expr   string
}

// Dashboard is the part of a Grafana dashboard model these checks need.
type Dashboard struct {
	UID    string  `json:"uid"`
	Title  string  `json:"title"`
	Panels []Panel `json:"panels"`
}

// Panel is a dashboard panel; rows nest their panels when collapsed.
type Panel struct {
	Type    string   `json:"type"`
	Title   string   `json:"title"`
	Targets []Target `json:"targets"`
	Panels  []Panel  `json:"panels"`
}

// Target is one query of a panel.
type Target struct {
	RefID string `json:"refId"`
	Expr  string `json:"expr"`
}

// LoadDashboard parses DashboardJSON strictly enough to catch a broken file.
func LoadDashboard() (Dashboard, error) {
	var d Dashboard
	if err := json.Unmarshal(DashboardJSON, &d); err != nil {
		return d, fmt.Errorf("dashboards/dataenv.json: %w", err)
	}
	if d.UID == "" || d.Title == "" || len(d.Panels) == 0 {
		return d, fmt.Errorf("dashboards/dataenv.json: uid, title and panels are required")
	}
	return d, nil
}

// DashboardQueries lists the expression of every panel target (rows included).
func DashboardQueries() ([]Query, error) {
	d, err := LoadDashboard()
	if err != nil {
		return nil, err
	}
	var qs []Query
	var walk func([]Panel)
	walk = func(ps []Panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				qs = append(qs, Query{Source: fmt.Sprintf("panel %q %s", p.Title, t.RefID), Expr: t.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return qs, nil
}

// RuleGroups is the shape of a Prometheus rules file.
type RuleGroups struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []Rule `yaml:"rules"`
	} `yaml:"groups"`
}

// Rule is one alerting or recording rule.
type Rule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// AlertQueries lists the expression of every rule in RulesYAML.
func AlertQueries() ([]Query, error) {
	var rg RuleGroups
	if err := yaml.Unmarshal(RulesYAML, &rg); err != nil {
		return nil, fmt.Errorf("alerts/dataenv.rules.yml: %w", err)
	}
	var qs []Query
	for _, g := range rg.Groups {
		for _, r := range g.Rules {
			name := "alert " + r.Alert
			if r.Record != "" {
				name = "record " + r.Record
			}
			qs = append(qs, Query{Source: name, Expr: r.Expr})
		}
	}
	return qs, nil
}

// Expand replaces the Grafana variables the dashboard uses ($__rate_interval, and the datasource
// variable which never appears in expressions) with values Prometheus accepts.
func Expand(expr, rateInterval string) string {
	return strings.ReplaceAll(expr, "$__rate_interval", rateInterval)
}
