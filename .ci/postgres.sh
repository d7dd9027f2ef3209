# Sourced by .ci/run: start a throwaway PostgreSQL on a spare loopback port and export
# AGENTRUNNER_TEST_DATABASE_URL. Installs the server from Debian's packages when absent.
# initdb refuses to run as root, so the cluster belongs to the `postgres` user.

if [ -n "${AGENTRUNNER_TEST_DATABASE_URL:-}" ]; then
    return 0
fi

pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$pg_bin" ] || [ ! -x "$pg_bin/initdb" ]; then
    echo "ci: installing PostgreSQL" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq postgresql >/dev/null
    pg_bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
fi

pg_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
pg_data=$(mktemp -d /tmp/agentrunner-ci-pg.XXXXXX)

if [ "$(id -u)" = "0" ]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
    chown postgres "$pg_data"
    as_pg() { runuser -u postgres -- "$@"; }
else
    as_pg() { "$@"; }
fi

as_pg "$pg_bin/initdb" -D "$pg_data/data" -A trust -U postgres >/dev/null
as_pg "$pg_bin/pg_ctl" -D "$pg_data/data" -l "$pg_data/log" -w \
    -o "-p $pg_port -k $pg_data -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" \
    start >/dev/null
trap 'as_pg "$pg_bin/pg_ctl" -D "$pg_data/data" -m immediate stop >/dev/null 2>&1 || true' EXIT
as_pg "$pg_bin/createdb" -h 127.0.0.1 -p "$pg_port" -U postgres agentrunner_test

export AGENTRUNNER_TEST_DATABASE_URL="postgresql://postgres@127.0.0.1:$pg_port/agentrunner_test"
# What the tests that restart the server under a worker need (tests/throwaway_postgres.py).
export AGENTRUNNER_TEST_POSTGRES_DIR="$pg_data"
export AGENTRUNNER_TEST_POSTGRES_BIN="$pg_bin"
echo "ci: PostgreSQL $("$pg_bin/postgres" --version | awk '{print $3}') on port $pg_port" >&2
