#!/bin/sh
# The official postgres image's contract, for a server from Debian's packages:
# initialize $PGDATA on first start (superuser $POSTGRES_USER with
# $POSTGRES_PASSWORD, database $POSTGRES_DB, scripts in
# /docker-entrypoint-initdb.d), then run the server listening on every interface.
set -eu

if [ "${1#-}" != "$1" ]; then
    set -- postgres "$@"
fi
if [ "$1" != "postgres" ]; then
    exec "$@"
fi
shift

PGDATA="${PGDATA:-/var/lib/postgresql/data}"
export PGDATA
user="${POSTGRES_USER:-postgres}"
db="${POSTGRES_DB:-$user}"
password="${POSTGRES_PASSWORD:-}"
auth="${POSTGRES_HOST_AUTH_METHOD:-}"

if [ ! -s "$PGDATA/PG_VERSION" ]; then
    if [ -z "$password" ] && [ "$auth" != "trust" ]; then
        echo "Error: the database is uninitialized and POSTGRES_PASSWORD is not set." >&2
        echo "  Set POSTGRES_PASSWORD, or POSTGRES_HOST_AUTH_METHOD=trust to allow every connection." >&2
        exit 1
    fi
    mkdir -p "$PGDATA"
    chmod 700 "$PGDATA"
    pwfile="$(mktemp)"
    printf '%s\n' "$password" > "$pwfile"
    # shellcheck disable=SC2086
    initdb --username="$user" --pwfile="$pwfile" --auth-local=trust \
        --auth-host="${auth:-scram-sha-256}" ${POSTGRES_INITDB_ARGS:-} >/dev/null
    rm -f "$pwfile"
    printf 'host all all all %s\n' "${auth:-scram-sha-256}" >> "$PGDATA/pg_hba.conf"
    # A private socket-only server for initialization: nothing can connect over
    # the network before the database is ready, so a health check cannot pass early.
    pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -k /var/run/postgresql" -w start >/dev/null
    if [ "$db" != "postgres" ]; then
        psql -v ON_ERROR_STOP=1 -h /var/run/postgresql -U "$user" -d postgres -q \
            -c "CREATE DATABASE \"$db\""
    fi
    for script in /docker-entrypoint-initdb.d/*; do
        case "$script" in
            *.sql) psql -v ON_ERROR_STOP=1 -h /var/run/postgresql -U "$user" -d "$db" -q -f "$script" ;;
            *.sh) . "$script" ;;
        esac
    done
    pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
    echo "PostgreSQL init process complete; ready for start up."
fi

exec postgres -D "$PGDATA" -c listen_addresses='*' "$@"
