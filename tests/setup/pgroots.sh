#!/usr/bin/env bash
# Prepares the Debian roots the test matrix runs PostgreSQL 17 and 18 from (this machine's own
# Debian packages only PostgreSQL 15): for each version N, under ${DATAENV_PG_ROOTS:-.deps/pg}/N/
#   root/   a debootstrap (--variant=minbase) of the Debian release that packages postgresql-N
#           (17: trixie, 18: forky, i.e. testing) with postgresql-N installed and no cluster
#           created; sidecar/localpg runs its server chrooted there (Config.Root)
#   bin/    pg_dump, pg_restore, pg_dumpall and psql of version N as scripts that run on this
#           machine through the root's own dynamic loader and libraries (no chroot: they see this
#           machine's files), for the sidecar's --pg-tools-dirs
#   ready   written last: the recipe, the suite and the package version
# Inside each root, a symbolic link at the root's own absolute path points to "/": a path of this
# machine under the root then names the same file inside it, so the server and this machine agree
# on paths such as the data directory (localpg uses them as they are when the link is there).
# A directory without `ready` (an interrupted run) is removed and prepared again; `ready` from an
# older RECIPE too. Idempotent and silent when everything is there. Needs root (or sudo) for
# debootstrap and chroot. Versions: $DATAENV_PG_ROOT_VERSIONS (default "17 18"); the Debian
# archive: $DATAENV_DEBIAN_MIRROR (default http://deb.debian.org/debian).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DIR="$(realpath -m "${DATAENV_PG_ROOTS:-$REPO/.deps/pg}")" # absolute, no symlinks: see the link below
MIRROR="${DATAENV_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
read -r -a VERSIONS <<<"${DATAENV_PG_ROOT_VERSIONS-17 18}"
RECIPE=2 # bump when the steps below change: roots prepared by an older recipe are redone

say() { echo "pgroots: $*" >&2; }

as_root() {
  if [[ $(id -u) -eq 0 ]]; then "$@"
  elif command -v sudo >/dev/null; then sudo "$@"
  else say "need root to run: $*"; exit 1
  fi
}

suite_of() {
  case "$1" in
    17) echo trixie ;;
    18) echo forky ;;
    *) say "no Debian release known for PostgreSQL $1 (known: 17 trixie, 18 forky)"; exit 1 ;;
  esac
}

# ready N: the root of version N is complete and from this recipe.
ready() {
  local d="$DIR/$1"
  [[ -f "$d/ready" && -x "$d/root/usr/lib/postgresql/$1/bin/postgres" && -x "$d/bin/pg_dump" ]] &&
    [[ "$(head -n 1 "$d/ready")" == "recipe=$RECIPE suite=$(suite_of "$1") package=postgresql-$1" ]]
}

# discard PATH: removes a root, never crossing into a file system mounted inside it (mounts are
# made in private namespaces below, so none should be left; any found are detached first).
discard() {
  local path="$1" m
  [[ -e "$path" ]] || return 0
  while read -r m; do
    as_root umount -l "$m" || true
  done < <(awk -v p="$path/" 'index($2, p) == 1 { print $2 }' /proc/self/mounts | sort -r)
  as_root rm -rf --one-file-system "$path"
}

# wrapper TOOL N LIBDIR: a script in bin/ running the root's TOOL with the root's loader.
wrapper() {
  local tool="$1" v="$2" libdir="$3" loader="$4"
  cat <<EOF
#!/bin/sh
# $tool of PostgreSQL $v from the Debian root beside this directory (tests/setup/pgroots.sh),
# run on this machine through the root's own dynamic loader and libraries.
d=\$(CDPATH= cd -- "\$(dirname -- "\$0")/.." && pwd)
exec "\$d/root/$loader" --library-path "\$d/root/$libdir" --argv0 "\$0" "\$d/root/usr/lib/postgresql/$v/bin/$tool" "\$@"
EOF
}

# build N: prepares DIR/N from scratch in DIR/N.partial, then renames it.
build() {
  local v="$1" suite tmp script libc libdir loader tool
  suite="$(suite_of "$v")"
  tmp="$DIR/$v.partial"
  discard "$tmp"
  discard "$DIR/$v"
  mkdir -p "$tmp"
  script=/usr/share/debootstrap/scripts/$suite
  [[ -e "$script" ]] || script=/usr/share/debootstrap/scripts/sid # an older debootstrap: testing
  # A mount namespace of its own: debootstrap's /proc and /sys mounts vanish with it, even when
  # this script is killed.
  as_root unshare --mount --propagation private \
    debootstrap --variant=minbase "$suite" "$tmp/root" "$MIRROR" "$script"
  # No service starts, no "main" cluster; the archive may serve a Release past its Valid-Until
  # (a frozen mirror), which only matters for a root that is rebuilt anyway.
  as_root sh -c 'r="$1"
    printf "#!/bin/sh\nexit 101\n" >"$r/usr/sbin/policy-rc.d" && chmod 755 "$r/usr/sbin/policy-rc.d"
    mkdir -p "$r/etc/postgresql-common"
    echo "create_main_cluster = false" >"$r/etc/postgresql-common/createcluster.conf"
    printf "Acquire::Check-Valid-Until \"false\";\nAPT::Install-Recommends \"false\";\n" \
      >"$r/etc/apt/apt.conf.d/99dataenv"' sh "$tmp/root"
  # Package scripts want /proc (systemd-tmpfiles); it is mounted in a namespace of its own too.
  as_root unshare --mount --propagation private sh -c 'mount -t proc proc "$1/proc" &&
    exec chroot "$1" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
      DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 sh -c "apt-get update -q &&
        apt-get install -y -q -o Dpkg::Options::=--force-confold postgresql-$2 &&
        apt-get clean && rm -rf /var/lib/apt/lists/*"' sh "$tmp/root" "$v"
  as_root sh -c 'mkdir -p "$1$(dirname "$2")" && ln -sfn / "$1$2"' sh "$tmp/root" "$DIR/$v/root"
  as_root chroot "$tmp/root" "/usr/lib/postgresql/$v/bin/postgres" --version | grep -q "(PostgreSQL) $v\." ||
    { say "postgres $v does not run in $tmp/root"; return 1; }

  libc="$(cd "$tmp/root" && ls usr/lib/*-linux-gnu/libc.so.6 | head -n 1)"
  libdir="$(dirname "$libc")"
  loader="$(cd "$tmp/root" && ls "$libdir"/ld-linux*.so.* | head -n 1)"
  mkdir -p "$tmp/bin"
  for tool in pg_dump pg_restore pg_dumpall psql; do
    wrapper "$tool" "$v" "$libdir" "$loader" >"$tmp/bin/$tool"
    chmod 755 "$tmp/bin/$tool"
  done
  "$tmp/bin/pg_dump" --version | grep -q "(PostgreSQL) $v\." ||
    { say "the pg_dump $v wrapper does not run on this machine"; return 1; }

  {
    echo "recipe=$RECIPE suite=$suite package=postgresql-$v"
    as_root chroot "$tmp/root" dpkg-query -W -f='version=${Version}\n' "postgresql-$v"
  } >"$tmp/ready"
  mv "$tmp" "$DIR/$v"
}

todo=()
for v in "${VERSIONS[@]}"; do ready "$v" || todo+=("$v"); done
(( ${#todo[@]} )) || exit 0

mkdir -p "$DIR"
exec 9>"$DIR/.lock"
flock 9 # another run in this tree prepares them: wait, then see what is left
todo=()
for v in "${VERSIONS[@]}"; do ready "$v" || todo+=("$v"); done
(( ${#todo[@]} )) || exit 0

if ! command -v debootstrap >/dev/null && [[ ! -x /usr/sbin/debootstrap ]]; then
  say "debootstrap is missing: run tests/setup/deps.sh (make deps), which installs it"; exit 1
fi

# The roots are built side by side (each mostly waits on downloads).
declare -A pids=()
for v in "${todo[@]}"; do
  say "preparing PostgreSQL $v in a Debian $(suite_of "$v") root under $DIR/$v (log: $DIR/$v.log)"
  build "$v" >"$DIR/$v.log" 2>&1 &
  pids[$v]=$!
done
failed=0
for v in "${todo[@]}"; do
  if ! wait "${pids[$v]}"; then
    say "PostgreSQL $v root failed (the next run starts it again):"
    tail -n 30 "$DIR/$v.log" >&2
    failed=1
  fi
done
exit "$failed"
