package localpg

import (
	"log/slog"
)

// MinMajorVersion is the oldest PostgreSQL major version localpg accepts.
const MinMajorVersion = 15

// DefaultSuperUser is the name of the superuser initdb creates.
const DefaultSuperUser = "postgres"

// Config describes a cluster to start. The zero value starts a throwaway cluster in a new
// temporary directory on a free port.
type Config struct {
	// Dir is the cluster's directory: data/ (PGDATA), sock/ (unix socket), postgres.log and
	// cluster.json (port and superuser credentials). Throwaway clusters: empty means a new
	// temporary directory; a given Dir must not exist or be empty, and is removed at Stop.
	// Persistent clusters: required, created when missing, reused when it holds a cluster.
	Dir string
	// Name labels the cluster in temporary directory names and logs. Default "pg".
	Name string
	// Port to listen on at 127.0.0.1. 0: a free port (persistent clusters first try the port
	// they had last time).
	Port int
	// Persistent keeps the directory at Stop and reuses it (starting the server if it is
	// stopped, or attaching to it if it already runs) at the next Start.
	Persistent bool
	// Fsync keeps fsync, synchronous_commit and full_page_writes on for a throwaway cluster.
	// Throwaway clusters default to off (fast, unsafe on a crash: the data is discarded anyway);
	// persistent clusters always keep them on.
	Fsync bool
	// BinDir holds initdb, pg_ctl and postgres. Empty: see the package documentation. With
	// Root, a path inside the root (empty: its newest /usr/lib/postgresql/N/bin).
	BinDir string
	// Root is a directory holding a root file system (a Debian debootstrap, say) with a
	// PostgreSQL server installed in it: the server runs chrooted there, which is how this
	// machine runs a major version its own system does not package. Dir must be inside Root;
	// throwaway clusters default to a temporary directory under Root/tmp. The server runs as
	// the root's own postgres user (or DATAENV_PG_USER): when this process is root, through
	// chroot and setuid; otherwise in a user namespace that maps the caller to that user
	// (unprivileged user namespaces must be allowed). Clients reach it over 127.0.0.1 as usual.
	// When the root holds a symbolic link at its own absolute path pointing to "/" (as
	// tests/setup/pgroots.sh makes), the server is given this machine's paths, so that what it
	// reports (data_directory, say) names the same files here; otherwise paths relative to Root.
	Root string
	// Settings are extra postgresql.conf settings, written at initdb time (name = value; values
	// are written as given, quote strings yourself).
	Settings map[string]string
	// Files are written into the data directory when it is created (name relative to it, mode
	// 0600, owned by the server's user): a TLS certificate and key, say, which Settings then
	// name by relative paths (PostgreSQL reads those relative to the data directory), so that
	// they work in a Root too.
	Files map[string][]byte
	// Logger receives start/stop events. Default: discard.
	Logger *slog.Logger
}

func (c Config) name() string {
	if c.Name == "" {
		return "pg"
	}
	return c.Name
}

func (c Config) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

// baseSettings are the settings every cluster gets; fsync-related ones are added for throwaways.
func (c Config) settings() [][2]string {
	s := [][2]string{
		{"listen_addresses", "'127.0.0.1'"},
		{"wal_level", "logical"},
		{"max_replication_slots", "40"},
		{"max_wal_senders", "40"},
		{"max_connections", "200"},
		{"max_locks_per_transaction", "128"},
		{"shared_buffers", "'64MB'"},
		{"unix_socket_permissions", "0700"},
		{"timezone", "'UTC'"},
		{"log_timezone", "'UTC'"},
	}
	if !c.Persistent && !c.Fsync {
		s = append(s, [2]string{"fsync", "off"}, [2]string{"synchronous_commit", "off"},
			[2]string{"full_page_writes", "off"})
	}
	for k, v := range c.Settings {
		s = append(s, [2]string{k, v})
	}
	return s
}
