// Package localpg starts PostgreSQL clusters from the machine's own binaries: throwaway clusters
// for tests (a temporary directory, fsync off, everything removed at Stop, and removed anyway if
// the process dies) and persistent clusters for `dataenv dev` / `make run` (a directory that is
// reused across runs).
//
// Every cluster has wal_level=logical, room for many replication slots and WAL senders, listens on
// 127.0.0.1 at a free (or chosen) port and puts its unix socket in a private directory. A
// superuser with a generated password (scram-sha-256) is created by initdb.
//
// initdb and postgres refuse to run as root. When the process runs as root, localpg runs them as
// Debian's `postgres` system user (or DATAENV_PG_USER) in directories chowned to that user.
//
// Binaries: Config.BinDir, else $DATAENV_PG_BINDIR, else the newest /usr/lib/postgresql/N/bin
// (N >= 15), else the directory initdb on PATH resolves to.
//
// Other major versions: Config.Root names a root file system with PostgreSQL installed (a
// Debian debootstrap with postgresql-N, as tests/setup/pgroots.sh prepares for 17 and 18) and the
// server runs chrooted in it, on this machine's loopback like any other. The cluster directory
// then lives inside the root. As root, localpg chroots and switches to the root's own postgres
// user; as an ordinary user it creates a user namespace that maps the caller to that user and
// chroots there, which needs unprivileged user namespaces (Debian's default; refused with a clear
// error where a sysctl turns them off). Clients never enter the root: they connect over TCP.
package localpg
