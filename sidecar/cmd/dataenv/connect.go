package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

const connectSummary = `Connects your own tools to a workspace, as the workspace's role (you must be a member;
--dsn is your own connection to the control database).

  dataenv connect --workspace W                 print the DuckDB script (dataenv.duckdb_script):
                                                duckdb -init <(dataenv connect --workspace W)
  dataenv connect --workspace W --dbt-profile   print a dbt-duckdb profile (profiles.yml)
  dataenv connect --workspace W --psql NAME     run psql on datatable NAME (extra arguments go to psql)

The script and the profile hold the role's password: keep them private.`

func runConnect(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newControlFlags("connect", connectSummary)
	ws := fs.String("workspace", "", "the workspace (or fork) to connect to")
	dbt := fs.Bool("dbt-profile", false, "print a dbt-duckdb profile instead of the DuckDB script")
	profile := fs.String("profile-name", "dataenv", "the profile's name in the dbt profile")
	target := fs.String("target", "dev", "the target's name in the dbt profile")
	threads := fs.Int("threads", 1, "threads of the dbt target")
	dt := fs.String("psql", "", "run psql on this datatable of the workspace")
	conn, err := fs.parseAndConnect(ctx, args)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if *ws == "" {
		return errors.New("--workspace is required")
	}
	switch {
	case *dt != "":
		return connectPsql(ctx, conn, *ws, *dt, fs.Args())
	case *dbt:
		return printDBTProfile(ctx, conn, stdout, *ws, *profile, *target, *threads)
	}
	var script string
	if err := conn.QueryRow(ctx, `SELECT dataenv.duckdb_script($1)`, *ws).Scan(&script); err != nil {
		return fmt.Errorf("dataenv.duckdb_script: %w", err)
	}
	_, err = io.WriteString(stdout, script)
	return err
}

// connectPsql runs psql on a datatable's database as the workspace's role; the password goes
// through the environment, never the command line.
func connectPsql(ctx context.Context, conn *pgx.Conn, ws, datatable string, extra []string) error {
	var uri, cluster string
	var ready bool
	err := conn.QueryRow(ctx, `SELECT uri, cluster, ready FROM dataenv.connection_info($1) WHERE datatable = $2`, ws, datatable).Scan(&uri, &cluster, &ready)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("workspace %q has no datatable %q (SELECT datatable FROM dataenv.connection_info(%s) lists them)", ws, datatable, sqlLiteral(ws))
	}
	if err != nil {
		return fmt.Errorf("dataenv.connection_info: %w", err)
	}
	if !ready {
		return fmt.Errorf("datatable %q of %q is not prepared yet: SELECT dataenv.prepare_connection(%s), wait for it, and connect again", datatable, ws, sqlLiteral(ws))
	}
	var pw string
	if err := conn.QueryRow(ctx, `SELECT dataenv.connection_password($1, $2)`, ws, cluster).Scan(&pw); err != nil {
		return fmt.Errorf("dataenv.connection_password: %w", err)
	}
	bin, err := exec.LookPath("psql")
	if err != nil {
		return fmt.Errorf("psql is not installed: %w (the URI is %s)", err, uri)
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{uri}, extra...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "PGPASSWORD="+pw)
	return cmd.Run()
}

type duckdbSettings struct {
	Extensions []string `json:"extensions"`
	Secrets    []struct {
		Name, Host, Port, User, Database, Password string
	} `json:"secrets"`
	Attaches []struct {
		Alias    string `json:"alias"`
		ReadOnly bool   `json:"read_only"`
		Path     string `json:"path"`
		Options  []struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		} `json:"options"`
	} `json:"attaches"`
	Use string `json:"use"`
	S3  bool   `json:"s3"`
}

// printDBTProfile prints a dbt-duckdb profile doing what duckdb_script does: an in-memory DuckDB
// with the workspace's secrets and attaches, the workspace's own lake as the target database.
func printDBTProfile(ctx context.Context, conn *pgx.Conn, w io.Writer, ws, profile, target string, threads int) error {
	var raw []byte
	if err := conn.QueryRow(ctx, `SELECT dataenv.duckdb_settings($1)`, ws).Scan(&raw); err != nil {
		return fmt.Errorf("dataenv.duckdb_settings: %w", err)
	}
	var st duckdbSettings
	if err := json.Unmarshal(raw, &st); err != nil {
		return fmt.Errorf("dataenv.duckdb_settings: %w", err)
	}
	if st.Use == "" {
		return fmt.Errorf("workspace %q has no lake of its own to build into (or several: dbt needs one target database)", ws)
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	var b strings.Builder
	fmt.Fprintf(&b, "# dbt-duckdb profile of workspace %s (dataenv connect --dbt-profile). It holds a password: keep it private.\n", ws)
	if st.S3 {
		b.WriteString("# A lake keeps its files on S3: add an s3 secret (type: s3, key_id, secret, ...) under secrets.\n")
	}
	fmt.Fprintf(&b, "%s:\n  target: %s\n  outputs:\n    %s:\n", q(profile), q(target), q(target))
	fmt.Fprintf(&b, "      type: duckdb\n      path: \":memory:\"\n      database: %s\n      threads: %d\n", q(st.Use), threads)
	b.WriteString("      extensions:\n")
	for _, e := range st.Extensions {
		fmt.Fprintf(&b, "        - %s\n", q(e))
	}
	b.WriteString("      secrets:\n")
	for _, s := range st.Secrets {
		port, _ := strconv.Atoi(s.Port)
		fmt.Fprintf(&b, "        - type: postgres\n          name: %s\n          host: %s\n          port: %d\n          user: %s\n          password: %s\n          database: %s\n",
			q(s.Name), q(s.Host), port, q(s.User), q(s.Password), q(s.Database))
	}
	b.WriteString("      attach:\n")
	for _, a := range st.Attaches {
		fmt.Fprintf(&b, "        - path: %s\n          alias: %s\n          read_only: %t\n", q(a.Path), q(a.Alias), a.ReadOnly)
		if len(a.Options) > 0 {
			b.WriteString("          options:\n")
		}
		for _, o := range a.Options {
			fmt.Fprintf(&b, "            %s: %s\n", q(strings.ToLower(o.Name)), yamlOption(o.Value))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// yamlOption is an ATTACH option's SQL value as dbt-duckdb wants it: a quoted SQL literal stays a
// string (dbt passes it through), a flag or TRUE/FALSE a boolean, a number a number.
func yamlOption(v string) string {
	switch strings.ToUpper(v) {
	case "", "TRUE":
		return "true"
	case "FALSE":
		return "false"
	}
	if _, err := strconv.ParseFloat(v, 64); err == nil {
		return v
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func sqlLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
