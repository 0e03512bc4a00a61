#!/usr/bin/env bash
# Make sure the PostgreSQL server the test suite uses is installed and running, idempotently:
# Debian's `postgresql` package, a cluster on 127.0.0.1:5432, trust auth for local connections
# (user `postgres`), and a `test` database. Does nothing but check when all of that already holds.
#
# Needs root (apt-get, pg_ctlcluster) unless the server already runs. Set TEPHRA_TEST_PG_URL to
# point the suite at another server instead; this script then only checks that one answers.
set -euo pipefail

HOST=127.0.0.1
PORT=5432
say() { echo "ensure-postgres: $*" >&2; }
die() { say "$*"; exit 1; }

ready() { pg_isready -h "$HOST" -p "$PORT" -q 2>/dev/null; }
psql_admin() { psql -h "$HOST" -p "$PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 -qtA "$@"; }

if [[ -n "${TEPHRA_TEST_PG_URL:-}" ]]; then
    say "TEPHRA_TEST_PG_URL is set; using that server as it is"
    exit 0
fi

install_server() {
    command -v apt-get >/dev/null 2>&1 || die "no PostgreSQL server and no apt-get to install one"
    say "installing Debian's postgresql package"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq postgresql >/dev/null
}

has_server() {
    command -v pg_ctlcluster >/dev/null 2>&1 && compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null
}

# The newest installed major version with a `main` cluster (created if the package did not).
cluster_version() {
    local version
    version="$(basename "$(dirname "$(dirname "$(ls /usr/lib/postgresql/*/bin/postgres \
        | sort -V | tail -n1)")")")"
    [[ -n "$version" ]] || die "PostgreSQL is installed but /usr/lib/postgresql is empty"
    if [[ ! -d "/etc/postgresql/$version/main" ]]; then
        say "creating cluster $version/main"
        pg_createcluster --port "$PORT" "$version" main >/dev/null
    fi
    echo "$version"
}

# Trust for loopback and the local socket: the suite connects as `postgres` with no password.
configure() {
    local conf="/etc/postgresql/$1/main"
    mkdir -p "$conf/conf.d"
    printf "listen_addresses = '%s'\nport = %s\n" "$HOST" "$PORT" > "$conf/conf.d/tephra-test.conf"
    if ! grep -q '^# tephra-test trust' "$conf/pg_hba.conf"; then
        say "setting trust auth for local connections in $conf/pg_hba.conf"
        cat > "$conf/pg_hba.conf" <<'EOF'
# tephra-test trust: written by scripts/ensure-postgres.sh for a throwaway test server
local   all             all                                     trust
host    all             all             127.0.0.1/32            trust
host    all             all             ::1/128                 trust
local   replication     all                                     trust
host    replication     all             127.0.0.1/32            trust
EOF
    fi
}

start() {
    say "starting cluster $1/main"
    pg_ctlcluster --skip-systemctl-redirect "$1" main start || pg_ctlcluster "$1" main restart
    for _ in $(seq 1 60); do ready && return 0; sleep 0.5; done
    die "cluster $1/main did not answer on $HOST:$PORT within 30 s; see /var/log/postgresql/"
}

if ! ready; then
    has_server || install_server
    version="$(cluster_version)"
    configure "$version"
    start "$version"
fi
if ! psql_admin -c 'select 1' >/dev/null 2>&1 && has_server; then
    version="$(cluster_version)"
    configure "$version"
    pg_ctlcluster --skip-systemctl-redirect "$version" main reload
    sleep 1
fi
psql_admin -c 'select 1' >/dev/null 2>&1 \
    || die "the server on $HOST:$PORT refuses user postgres without a password (trust auth needed)"
if [[ "$(psql_admin -c "select 1 from pg_database where datname = 'test'")" != 1 ]]; then
    psql_admin -c 'create database test' >/dev/null
fi
say "PostgreSQL ready on $HOST:$PORT (user postgres, database test)"
