// Command dataenv installs dataenv into a control database and runs its sidecar.
//
//	dataenv install   --dsn URL    install or upgrade the SQL API and tables
//	dataenv uninstall --dsn URL    remove them (slot, publication, schema)
//	dataenv sidecar   --dsn URL    run the sidecar (leader or hot standby)
//	dataenv status    --dsn URL    print dataenv.sidecar_status
//	dataenv dev                    local Postgres + install + sidecar, for trying it out
//
// Every flag falls back to a DATAENV_* environment variable.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout io.Writer) error
}

func commands() []command {
	return []command{
		{"install", "install or upgrade dataenv in a control database", runInstall},
		{"uninstall", "remove dataenv from a control database", runUninstall},
		{"sidecar", "run the sidecar (tails requests, performs them, writes outcomes)", runSidecar},
		{"status", "show the sidecars, their leader, confirmed LSN and readiness", runStatus},
		{"dev", "start a local Postgres, install dataenv and run the sidecar in the foreground", runDev},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "dataenv:", err)
			os.Exit(1)
		}
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		return nil
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout)
		}
	}
	usage(os.Stderr)
	return fmt.Errorf("unknown command %q", args[0])
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "dataenv: isolated, disposable data environments driven from SQL.")
	fmt.Fprintln(w, "\nUsage: dataenv <command> [flags]   (dataenv <command> --help for its flags)")
	fmt.Fprintln(w, "\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nEvery flag can also be set with an environment variable: --dsn is DATAENV_DSN, --http-addr is DATAENV_HTTP_ADDR, ...")
}

// flagSet builds a command's flags; every flag's default comes from DATAENV_<NAME>.
type flagSet struct{ *flag.FlagSet }

func newFlags(name, summary string) flagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: dataenv %s [flags]\n\n%s\n\nFlags (environment fallback in brackets):\n", name, summary)
		fs.PrintDefaults()
	}
	return flagSet{fs}
}

func envName(flagName string) string {
	return "DATAENV_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func (f flagSet) String(name, def, help string) *string {
	if v, ok := os.LookupEnv(envName(name)); ok {
		def = v
	}
	return f.FlagSet.String(name, def, fmt.Sprintf("%s [%s]", help, envName(name)))
}

func (f flagSet) Bool(name string, def bool, help string) *bool {
	if v, ok := os.LookupEnv(envName(name)); ok {
		def = v == "1" || strings.EqualFold(v, "true")
	}
	return f.FlagSet.Bool(name, def, fmt.Sprintf("%s [%s]", help, envName(name)))
}

// isSet reports whether the flag was given on the command line or through its environment
// variable (after Parse).
func (f flagSet) isSet(name string) bool {
	set := false
	f.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	_, inEnv := os.LookupEnv(envName(name))
	return set || inEnv
}

func (f flagSet) Int(name string, def int, help string) *int {
	if v, ok := os.LookupEnv(envName(name)); ok {
		_, _ = fmt.Sscan(v, &def)
	}
	return f.FlagSet.Int(name, def, fmt.Sprintf("%s [%s]", help, envName(name)))
}

func newLogger(level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}

func requireDSN(dsn string) error {
	if dsn == "" {
		return errors.New("--dsn (or DATAENV_DSN) is required: the control database, e.g. postgres://user@host:5432/db")
	}
	return nil
}
