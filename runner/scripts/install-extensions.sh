#!/usr/bin/env bash
# Puts the DuckDB extensions dataenv's runner loads (ducklake, postgres_scanner, httpfs) for
# DuckDB v1.5.5 into the runner's extension directory:
#   ${DATAENV_DUCKDB_EXTENSION_DIR:-$HOME/.duckdb/extensions}/v1.5.5/<platform>/<name>.duckdb_extension
# (DuckDB's own layout; runner/extension.Dir() computes the same path).
# First DuckDB's INSTALL (through the runner); where DuckDB's extension repository does not
# answer, the same signed binaries from the duckdb-extension-<name>==1.5.5 wheels on PyPI.
# Signatures stay intact: nothing here or in the runner sets allow_unsigned_extensions.
# Idempotent; prints nothing when everything is already there.
set -euo pipefail

VERSION=1.5.5
NAMES=(ducklake postgres_scanner httpfs)
ROOT="${DATAENV_DUCKDB_EXTENSION_DIR:-$HOME/.duckdb/extensions}"
case "$(uname -s)_$(uname -m)" in
  Linux_x86_64) PLATFORM=linux_amd64; WHEEL_PLATFORM=manylinux2014_x86_64 ;;
  Linux_aarch64) PLATFORM=linux_arm64; WHEEL_PLATFORM=manylinux2014_aarch64 ;;
  *) echo "install-extensions: unsupported platform $(uname -sm)" >&2; exit 1 ;;
esac
DEST="$ROOT/v$VERSION/$PLATFORM"

missing() {
  local out=()
  for n in "${NAMES[@]}"; do [[ -s "$DEST/$n.duckdb_extension" ]] || out+=("$n"); done
  echo "${out[@]:-}"
}

todo="$(missing)"
[[ -z "$todo" ]] && exit 0

echo "install-extensions: installing $todo into $DEST"
mkdir -p "$DEST"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

# 1. DuckDB's own INSTALL, bounded in time: offline it fails fast or hangs on the network.
if command -v go >/dev/null; then
  # shellcheck disable=SC2086
  if (cd "$HERE" && timeout 180 go run ./runner/cmd/dataenv-runner install \
        --extension-dir "$ROOT" $todo) >"$TMP/install.log" 2>&1; then
    todo="$(missing)"
  else
    echo "install-extensions: DuckDB's INSTALL failed ($(grep -o 'ERROR [^)]*' "$TMP/install.log" | head -1 || true)); using PyPI"
  fi
fi
[[ -z "$todo" ]] && { echo "install-extensions: done"; exit 0; }

# 2. The same binaries from PyPI: the wheels are zip files holding
#    duckdb_extension_<name>/extensions/v<version>/<name>.duckdb_extension.
PIP="$(command -v pip3 || command -v pip || true)"
[[ -z "$PIP" ]] && { echo "install-extensions: need pip (apt-get install python3-pip) or network access to DuckDB's repository" >&2; exit 1; }
pkgs=()
for n in $todo; do pkgs+=("duckdb-extension-${n//_/-}==$VERSION"); done
"$PIP" download --quiet --no-deps --only-binary=:all: --platform "$WHEEL_PLATFORM" \
  --dest "$TMP" "${pkgs[@]}"
for n in $todo; do
  whl=("$TMP"/duckdb_extension_"${n}"-"$VERSION"-*.whl)
  python3 - "${whl[0]}" "$n" "$VERSION" "$DEST" <<'PY'
import sys, zipfile, os
whl, name, version, dest = sys.argv[1:]
member = f"duckdb_extension_{name}/extensions/v{version}/{name}.duckdb_extension"
with zipfile.ZipFile(whl) as z:
    data = z.read(member)
tmp = os.path.join(dest, f".{name}.duckdb_extension.tmp")
with open(tmp, "wb") as f:
    f.write(data)
os.replace(tmp, os.path.join(dest, f"{name}.duckdb_extension"))
PY
done
todo="$(missing)"
[[ -n "$todo" ]] && { echo "install-extensions: still missing: $todo" >&2; exit 1; }
echo "install-extensions: done"
