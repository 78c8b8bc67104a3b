#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the assessment-server tests (tests/test_assess_server*.py):
# installs Debian's postgresql if missing, initdb's a cluster in a fresh folder, starts it on a
# local port (TCP on 127.0.0.1 only) and prints its URL on stdout, e.g.
#   export CMRKIT_TEST_POSTGRES_URL="$(bash .ci/postgres.sh)"
# `bash .ci/postgres.sh stop` stops the clusters it started. Root runs the server as the
# 'postgres' user (PostgreSQL refuses to run as root).
set -euo pipefail
STATE="${TMPDIR:-/tmp}/cmrkit-pg.started"
find_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }
as_owner() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
if [ "${1:-}" = "stop" ]; then
    BIN="$(find_bin)"
    if [ -f "$STATE" ]; then
        while read -r d; do
            as_owner "$BIN/pg_ctl" -D "$d/data" -m fast -w stop >&2 || true
            rm -rf "$d"
        done < "$STATE"
        rm -f "$STATE"
    fi
    exit 0
fi
PORT="${CMRKIT_PG_PORT:-55432}"
while (echo > "/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; do PORT=$((PORT + 1)); done
BIN="$(find_bin)"
if [ -z "$BIN" ] || [ ! -x "$BIN/initdb" ]; then
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    { $SUDO apt-get update -q && $SUDO apt-get install -y -q postgresql; } >&2
    BIN="$(find_bin)"
fi
DIR="$(mktemp -d /tmp/cmrkit-pg.XXXXXX)"
AS=()
if [ "$(id -u)" -eq 0 ]; then
    chown postgres: "$DIR"
    AS=(runuser -u postgres --)
fi
"${AS[@]}" "$BIN/initdb" -D "$DIR/data" -U cmrkit --auth=trust -E UTF8 --locale=C.UTF-8 >&2
"${AS[@]}" "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/log" -w \
    -o "-p $PORT -k $DIR -c listen_addresses=127.0.0.1 -c fsync=on -c max_connections=200" start >&2
"${AS[@]}" "$BIN/createdb" -h 127.0.0.1 -p "$PORT" -U cmrkit cmrkit_test >&2
echo "$DIR" >> "$STATE"
echo "postgresql cluster in $DIR on port $PORT (stop: bash .ci/postgres.sh stop)" >&2
echo "postgresql://cmrkit@127.0.0.1:$PORT/cmrkit_test"
