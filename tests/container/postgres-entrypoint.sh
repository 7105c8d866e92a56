#!/usr/bin/env bash
# Entrypoint of postgres.Dockerfile: on an empty data directory, initdb with
# POSTGRES_USER / POSTGRES_PASSWORD and create POSTGRES_DB, as the official
# image does; then run the server on every address, password (SCRAM) auth
# for connections over the network.
set -euo pipefail
: "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set}"
user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}
if [[ ! -s "$PGDATA/PG_VERSION" ]]; then
    pwfile=$(mktemp)
    printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
    initdb --username="$user" --pwfile="$pwfile" --auth-local=trust \
        --auth-host=scram-sha-256 --encoding=UTF8 -D "$PGDATA" >/dev/null
    rm -f "$pwfile"
    # initdb's host lines cover only 127.0.0.1 and ::1.
    printf 'host all all all scram-sha-256\n' >>"$PGDATA/pg_hba.conf"
    if [[ "$db" != postgres ]]; then
        pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
        createdb --username="$user" "$db"
        pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
    fi
    echo "postgres-entrypoint: initialised $PGDATA (user $user, database $db)"
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' "$@"
