#!/usr/bin/env bash
# Installs what dataenv's build, `make run` and the tests need on a Debian (bookworm or newer)
# machine, and nothing that is already there:
#   - PostgreSQL server and client >= 15 (Debian packages postgresql, postgresql-client):
#     initdb/pg_ctl/postgres for the throwaway test clusters and `make run`, psql/pg_dump
#   - bubblewrap (bwrap)
#   - procps (pgrep), g++ (cgo build of dataenv-runner), python3-pip (DuckDB extension wheels),
#     ca-certificates
#   - prometheus (promtool and the server the tests start themselves; its service is neither
#     started nor enabled)
#   - versitygw v1.8.0, the S3 server the tests run (go install, into $(go env GOPATH)/bin)
#   - the DuckDB extensions (hook: runner/scripts/install-extensions.sh)
#   - pg_partman for each installed PostgreSQL (postgresql-N-partman: a fork test's extension)
#   - btrfs-progs, xfsprogs, e2fsprogs (file systems in image files: the reflink clone tests)
#   - debootstrap, and the Debian roots the test matrix runs PostgreSQL 17 and 18 from
#     (tests/setup/pgroots.sh: .deps/pg/N, prepared once and reused; DATAENV_PG_ROOT_VERSIONS
#     chooses the versions, empty for none)
# Idempotent, and silent when everything is present. `apt-get update` runs only when a package is
# missing. Needs root (or sudo) only to install packages.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VERSITYGW_VERSION=v1.8.0
PG_MIN=15
LOG="${TMPDIR:-/tmp}/dataenv-deps.log"

say() { echo "deps: $*" >&2; }

as_root() {
  if [[ $(id -u) -eq 0 ]]; then "$@"
  elif command -v sudo >/dev/null; then sudo "$@"
  else say "need root to run: $*"; exit 1
  fi
}

# pg_bin_ok: a PostgreSQL >= PG_MIN server with initdb and pg_ctl under /usr/lib/postgresql.
pg_bin_ok() {
  local d v
  for d in /usr/lib/postgresql/*/bin; do
    v="$(basename "$(dirname "$d")")"
    [[ "$v" =~ ^[0-9]+$ ]] && (( v >= PG_MIN )) || continue
    [[ -x "$d/initdb" && -x "$d/pg_ctl" && -x "$d/postgres" ]] && return 0
  done
  return 1
}

# --- Debian packages -----------------------------------------------------------------------------
pkgs=()
pg_bin_ok || pkgs+=(postgresql)
command -v psql >/dev/null && command -v pg_dump >/dev/null || pkgs+=(postgresql-client)
command -v bwrap >/dev/null || pkgs+=(bubblewrap)
command -v promtool >/dev/null && command -v prometheus >/dev/null || pkgs+=(prometheus)
command -v pgrep >/dev/null || pkgs+=(procps)              # sidecar/procguard kills backends with it
command -v g++ >/dev/null || pkgs+=(g++)                    # cgo build of dataenv-runner (DuckDB)
command -v pip3 >/dev/null || pkgs+=(python3-pip)           # DuckDB extension wheels from PyPI
[[ -e /etc/ssl/certs/ca-certificates.crt ]] || pkgs+=(ca-certificates)  # go install over HTTPS
# mkfs.btrfs, mkfs.xfs, mkfs.ext4: file systems in image files for the reflink clone tests and bench
command -v mkfs.btrfs >/dev/null || [[ -x /usr/sbin/mkfs.btrfs ]] || pkgs+=(btrfs-progs)
command -v mkfs.xfs >/dev/null || [[ -x /usr/sbin/mkfs.xfs ]] || pkgs+=(xfsprogs)
command -v mkfs.ext4 >/dev/null || [[ -x /usr/sbin/mkfs.ext4 ]] || pkgs+=(e2fsprogs)
if [[ -n "${DATAENV_PG_ROOT_VERSIONS-17 18}" ]]; then                    # PostgreSQL 17/18 roots
  command -v debootstrap >/dev/null || [[ -x /usr/sbin/debootstrap ]] || pkgs+=(debootstrap)
fi

# install_pkgs installs Debian packages without starting their services.
install_pkgs() {
  command -v apt-get >/dev/null || { say "missing $* and no apt-get: install them by hand"; exit 1; }
  say "installing Debian packages: $* (log: $LOG)"
  # Keep package scripts from starting services (the PostgreSQL "main" cluster, prometheus):
  # the tests start their own servers. A policy-rc.d that is already there is left alone.
  own_policy=0
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    as_root sh -c 'printf "#!/bin/sh\nexit 101\n" >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d'
    own_policy=1
  fi
  trap '[[ $own_policy -eq 1 ]] && as_root rm -f /usr/sbin/policy-rc.d' EXIT
  export DEBIAN_FRONTEND=noninteractive
  if ! as_root apt-get update -q >"$LOG" 2>&1 ||
     ! as_root apt-get install -y -q --no-install-recommends "$@" >>"$LOG" 2>&1; then
    say "apt-get failed:"; tail -n 30 "$LOG" >&2; exit 1
  fi
  if [[ " $* " == *" prometheus "* ]] && command -v systemctl >/dev/null; then
    as_root systemctl disable --now prometheus >/dev/null 2>&1 || true
  fi
}

if (( ${#pkgs[@]} )); then
  install_pkgs "${pkgs[@]}"
  pg_bin_ok || { say "PostgreSQL >= $PG_MIN still missing after installing ${pkgs[*]}"; exit 1; }
fi

# pg_partman for each installed PostgreSQL: tests/forks forks a parent whose extension keeps its
# configuration in tables (TestForkKeepsAnExtensionsConfiguration).
pkgs=()
for d in /usr/lib/postgresql/*/bin; do
  v="$(basename "$(dirname "$d")")"
  [[ "$v" =~ ^[0-9]+$ ]] && (( v >= PG_MIN )) && [[ -x "$d/postgres" ]] || continue
  [[ -e "/usr/share/postgresql/$v/extension/pg_partman.control" ]] || pkgs+=("postgresql-$v-partman")
done
if (( ${#pkgs[@]} )); then install_pkgs "${pkgs[@]}"; fi

# initdb and postgres refuse root: as root, localpg runs them as the `postgres` system user,
# which the postgresql package creates. Create it when the binaries came from elsewhere.
if [[ $(id -u) -eq 0 ]] && ! id postgres >/dev/null 2>&1; then
  say "creating the postgres system user"
  useradd --system --user-group --home-dir /var/lib/postgresql --shell /bin/sh postgres
fi

# --- versitygw (S3 server for tests) -------------------------------------------------------------
command -v go >/dev/null || { say "go is missing: install Go (see go.mod for the version)"; exit 1; }
gobin="$(go env GOBIN)"; [[ -n "$gobin" ]] || gobin="$(go env GOPATH | cut -d: -f1)/bin"
vgw="$gobin/versitygw"
if ! { [[ -x "$vgw" ]] && go version -m "$vgw" 2>/dev/null |
       grep -q "mod[[:space:]]*github.com/versity/versitygw[[:space:]]*$VERSITYGW_VERSION"; }; then
  say "installing versitygw $VERSITYGW_VERSION into $gobin (log: $LOG)"
  if ! (cd / && GOFLAGS=-buildvcs=false go install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION") >>"$LOG" 2>&1; then
    say "go install versitygw failed:"; tail -n 30 "$LOG" >&2; exit 1
  fi
fi

# --- DuckDB extensions (owned by runner/) --------------------------------------------------------
# HOOK: the runner's script puts ducklake, postgres_scanner and httpfs into the runner's
# extension directory; it is idempotent and quiet when they are present.
if [[ -f "$REPO/runner/scripts/install-extensions.sh" ]]; then
  bash "$REPO/runner/scripts/install-extensions.sh"
fi

# --- PostgreSQL 17 and 18 for the test matrix (Debian roots under .deps/pg) ----------------------
bash "$REPO/tests/setup/pgroots.sh"

# --- Python: DuckDB and dbt-duckdb for the tests of one's own tools (.venv/ in the repository) ----
venv="$REPO/.venv"
req="$REPO/tests/setup/requirements.txt"
if ! [[ -x "$venv/bin/python" && -f "$venv/.requirements" ]] || ! cmp -s "$req" "$venv/.requirements"; then
  command -v python3 >/dev/null || { say "python3 is missing: install it (Debian: python3, python3-venv)"; exit 1; }
  say "installing the Python packages of $req into $venv (log: $LOG)"
  if ! { [[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"; } >>"$LOG" 2>&1 ||
     ! "$venv/bin/pip" install -q -r "$req" >>"$LOG" 2>&1; then
    say "pip install failed:"; tail -n 30 "$LOG" >&2; exit 1
  fi
  cp "$req" "$venv/.requirements"
fi
