#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the assessment-server tests (tests/test_assess_server*.py):
# installs Debian's postgresql if missing, initdb's a cluster in a fresh folder, starts it on a
# local port (TCP on 127.0.0.1 only) and prints its URL on stdout, e.g.
#   export CMRKIT_TEST_POSTGRES_URL="$(bash .ci/postgres.sh)"
# Stop it with: pg_ctl -D "$DIR" stop (the folder is printed on stderr). Root runs the server as
# the 'postgres' user (PostgreSQL refuses to run as root).
set -euo pipefail
PORT="${CMRKIT_PG_PORT:-55432}"
find_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }
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
echo "postgresql cluster in $DIR (stop: ${AS[*]} $BIN/pg_ctl -D $DIR/data stop)" >&2
echo "postgresql://cmrkit@127.0.0.1:$PORT/cmrkit_test"
