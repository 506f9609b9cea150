package lake

import (
	"fmt"
	"sort"
	"strings"
)

// ToolJobSQL is the job that prepares a workspace's lakes for its members' own tools: every
// lake attached under its own name (its namespace registered, granted and bootstrapped, the
// defer views made), nothing else.
func ToolJobSQL(lakes []string) string {
	sorted := append([]string{}, lakes...)
	sort.Strings(sorted)
	stmts := make([]string, 0, len(sorted))
	for _, l := range sorted {
		stmts = append(stmts, "ATTACH "+Literal(SchemeLake+l)+" AS "+Ident(ToolAlias(l)))
	}
	return strings.Join(stmts, ";\n") + ";"
}

// reservedAliases are names DuckDB does not accept (or that mean something else) as an alias.
var reservedAliases = map[string]bool{"main": true, "temp": true, "temporary": true, "system": true, "memory": true}

// ToolAlias is the alias a lake is attached under in a member's DuckDB script: the lake's name,
// or <name>_lake for a name DuckDB reserves (main, temp, system, memory).
func ToolAlias(lake string) string {
	if reservedAliases[strings.ToLower(lake)] {
		return lake + "_lake"
	}
	return lake
}

// ToolScript is the DuckDB script of dataenv.duckdb_script for workspace, from a plan of
// ToolJobSQL: extensions, the secrets (passwords and S3 keys as placeholders the SQL function
// fills in for a member), the lakes' own attaches under their names and the ancestors' READ_ONLY
// under the aliases the defer views read; USE of the lake when there is one.
func (p *Plan) ToolScript(workspace string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "-- dataenv: the lakes of workspace %s for a DuckDB session (dataenv.duckdb_script).\n", oneLine(workspace))
	b.WriteString("-- It holds the password of the workspace's role: keep it private.\n")
	exts := []string{"ducklake", "postgres"}
	if len(p.Remote) > 0 {
		exts = append(exts, "httpfs")
	}
	for _, e := range exts {
		fmt.Fprintf(&b, "INSTALL %s;\nLOAD %s;\n", e, e)
	}
	for _, s := range p.toolSecrets {
		b.WriteString(s + ";\n")
	}
	own := 0
	for _, t := range p.Tools {
		if t.CertNote {
			b.WriteString("-- the catalog's cluster uses a root certificate: add sslrootcert=<file> to the path below\n")
		}
		b.WriteString(t.SQL + ";\n")
		if !t.ReadOnly {
			own++
		}
	}
	if own == 1 {
		for _, t := range p.Tools {
			if !t.ReadOnly {
				b.WriteString("USE " + Ident(t.Alias) + ";\n")
			}
		}
	}
	return b.String()
}

func oneLine(s string) string { return strings.NewReplacer("\n", " ", "\r", " ").Replace(s) }

// ToolSettings is the structured form of a member's DuckDB session (what a dbt-duckdb profile
// needs): extensions, postgres secrets without passwords, attaches, the database to use.
type ToolSettings struct {
	Extensions []string     `json:"extensions"`
	Secrets    []ToolSecret `json:"secrets"`
	Attaches   []ToolAttach `json:"attaches"`
	Use        string       `json:"use,omitempty"`
	// S3 is true when a lake keeps its files on S3 (the settings carry no S3 secret).
	S3 bool `json:"s3,omitempty"`
}

// ToolSettings is the plan's session as settings.
func (p *Plan) ToolSettings() ToolSettings {
	st := ToolSettings{Extensions: []string{"ducklake", "postgres"}, Secrets: []ToolSecret{}, Attaches: p.Tools, S3: len(p.Remote) > 0}
	if p.catalogs != nil {
		st.Secrets = append(st.Secrets, p.catalogs.toolInfos...)
	}
	if st.Attaches == nil {
		st.Attaches = []ToolAttach{}
	}
	for _, t := range p.Tools {
		if !t.ReadOnly {
			if st.Use != "" {
				st.Use = ""
				break
			}
			st.Use = t.Alias
		}
	}
	return st
}
