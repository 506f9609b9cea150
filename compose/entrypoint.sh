#!/bin/sh
# Container entrypoint: install (or upgrade) dataenv in the control database, then run the
# sidecar. Both read DATAENV_DSN; the sidecar also DATAENV_HTTP_ADDR and the other DATAENV_*
# variables. Extra arguments go to `dataenv sidecar`.
set -eu

: "${DATAENV_DSN:?DATAENV_DSN must name the control database}"

# Postgres may still be starting when the container does (compose waits for its healthcheck,
# other orchestrators may not): try for up to a minute.
tries=0
until pg_isready -q -d "$DATAENV_DSN"; do
	tries=$((tries + 1))
	if [ "$tries" -ge 60 ]; then
		echo "dataenv-entrypoint: PostgreSQL not ready after 60 s" >&2
		exit 1
	fi
	sleep 1
done

dataenv install
exec dataenv sidecar "$@"
