#!/usr/bin/env bash
# A throwaway PostgreSQL server for baton's store tests (docs/store.md#postgresql).
#
#   eval "$(.ci/pg.sh start)"   # initdb + pg_ctl on a Unix socket in a new temporary directory;
#                               # prints `export BATON_TEST_PG=postgresql://...` and
#                               # `export BATON_TEST_PG_DIR=...`
#   .ci/pg.sh stop [DIR]        # stops the server and removes the directory
#                               # (default: $BATON_TEST_PG_DIR)
#
# The server listens on no TCP port, only on a socket in its directory, so parallel runs never
# collide. Run as root, it runs the server as the `postgres` user (initdb refuses root); the
# directory is made accessible to that user. Server binaries: $PG_BIN, else the newest
# /usr/lib/postgresql/*/bin, else PATH; as root on Debian without them, `apt-get install
# postgresql` first.
set -euo pipefail

bin_dir() {
    if [ -n "${PG_BIN:-}" ]; then echo "$PG_BIN"; return; fi
    local d
    d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
    if [ -n "$d" ]; then echo "$d"; return; fi
    dirname "$(command -v initdb)"
}

as_server() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "${1:-}" in
start)
    BIN="$(bin_dir 2>/dev/null || true)"
    if [ ! -x "$BIN/initdb" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        # A machine without the server: Debian's packages (as CI images are).
        apt-get install -y -q postgresql >&2
        BIN="$(bin_dir)"
    fi
    [ -x "$BIN/initdb" ] || { echo "pg.sh: no initdb in $BIN; install postgresql (Debian: apt-get install postgresql)" >&2; exit 1; }
    DIR="$(mktemp -d /tmp/baton-pg.XXXXXX)"
    chmod 0755 "$DIR"
    if [ "$(id -u)" = 0 ]; then chown postgres "$DIR"; fi
    as_server "$BIN/initdb" -D "$DIR/data" -U baton --auth=trust -E UTF8 --no-locale >"$DIR/initdb.log" 2>&1 \
        || { cat "$DIR/initdb.log" >&2; exit 1; }
    as_server "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w \
        -o "-c listen_addresses='' -c unix_socket_directories='$DIR' -c max_connections=200 -c fsync=off" \
        start >/dev/null || { cat "$DIR/server.log" >&2; exit 1; }
    as_server "$BIN/createdb" -h "$DIR" -U baton baton_test >/dev/null
    # The socket directory is a URL-encoded host: postgresql://user@%2Ftmp%2Fbaton-pg.x/db
    HOST="$(printf '%s' "$DIR" | sed 's,/,%2F,g')"
    echo "export BATON_TEST_PG='postgresql://baton@${HOST}/baton_test'"
    echo "export BATON_TEST_PG_DIR='$DIR'"
    ;;
stop)
    DIR="${2:-${BATON_TEST_PG_DIR:-}}"
    [ -n "$DIR" ] && [ -d "$DIR/data" ] || { echo "pg.sh: no server directory to stop (give DIR or set BATON_TEST_PG_DIR)" >&2; exit 1; }
    as_server "$(bin_dir)/pg_ctl" -D "$DIR/data" -m fast -w stop >/dev/null
    rm -rf "$DIR"
    ;;
*)
    echo "usage: .ci/pg.sh start | stop [DIR]" >&2
    exit 2
    ;;
esac
