#!/usr/bin/env bash
# Starts PostgreSQL 15 and MariaDB on free loopback ports in throw-away directories, for the
# store conformance suite and the cluster tests. Source it: it exports
#   XJOB_TEST_POSTGRES_URL  postgres://xjob:xjob@127.0.0.1:PORT/xjob
#   XJOB_TEST_MYSQL_URL     mysql://xjob:xjob@127.0.0.1:PORT/xjob
# and registers a trap that stops both servers when the calling shell exits.
# apt does not start services on these machines, so everything is started by hand here.

xjob_free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

xjob_install_databases() {
  local missing=()
  [ -x /usr/lib/postgresql/15/bin/postgres ] || missing+=(postgresql)
  command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || missing+=(mariadb-server)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

xjob_start_postgres() {
  local bin=/usr/lib/postgresql/15/bin
  XJOB_PG_DIR=$(mktemp -d /tmp/xjob-pg.XXXXXX)
  chown postgres:postgres "$XJOB_PG_DIR"
  local port; port=$(xjob_free_port)
  # PostgreSQL refuses to run as root: initdb and the server run as the postgres user.
  su postgres -s /bin/sh -c "$bin/initdb -D $XJOB_PG_DIR/data -U postgres -A trust >/dev/null"
  su postgres -s /bin/sh -c "$bin/pg_ctl -D $XJOB_PG_DIR/data -l $XJOB_PG_DIR/log -w \
    -o '-h 127.0.0.1 -p $port -k $XJOB_PG_DIR -c fsync=on -c max_connections=300' start >/dev/null"
  psql -h 127.0.0.1 -p "$port" -U postgres -q -c "CREATE USER xjob PASSWORD 'xjob' CREATEDB" \
    -c "CREATE DATABASE xjob OWNER xjob" >/dev/null
  export XJOB_TEST_POSTGRES_URL="postgres://xjob:xjob@127.0.0.1:$port/xjob"
  echo "postgresql on 127.0.0.1:$port"
}

xjob_stop_postgres() {
  [ -n "${XJOB_PG_DIR:-}" ] || return 0
  su postgres -s /bin/sh -c "/usr/lib/postgresql/15/bin/pg_ctl -D $XJOB_PG_DIR/data -m fast stop >/dev/null" || true
  rm -rf "$XJOB_PG_DIR"
}

xjob_start_mariadb() {
  XJOB_MY_DIR=$(mktemp -d /tmp/xjob-mariadb.XXXXXX)
  local port; port=$(xjob_free_port)
  mariadb-install-db --no-defaults --user=root --datadir="$XJOB_MY_DIR/data" \
    --auth-root-authentication-method=normal >/dev/null 2>&1
  mariadbd --no-defaults --user=root --datadir="$XJOB_MY_DIR/data" --socket="$XJOB_MY_DIR/sock" \
    --bind-address=127.0.0.1 --port="$port" --pid-file="$XJOB_MY_DIR/pid" \
    --max-connections=300 --log-error="$XJOB_MY_DIR/log" &
  local tries=0
  until mariadb --no-defaults -uroot --socket="$XJOB_MY_DIR/sock" -e 'SELECT 1' >/dev/null 2>&1; do
    tries=$((tries + 1))
    if [ $tries -gt 100 ]; then echo "mariadb did not start:"; cat "$XJOB_MY_DIR/log"; return 1; fi
    sleep 0.2
  done
  mariadb --no-defaults -uroot --socket="$XJOB_MY_DIR/sock" -e \
    "CREATE DATABASE xjob; CREATE USER 'xjob'@'%' IDENTIFIED BY 'xjob'; GRANT ALL ON *.* TO 'xjob'@'%';"
  export XJOB_TEST_MYSQL_URL="mysql://xjob:xjob@127.0.0.1:$port/xjob"
  echo "mariadb on 127.0.0.1:$port"
}

xjob_stop_mariadb() {
  [ -n "${XJOB_MY_DIR:-}" ] || return 0
  if [ -f "$XJOB_MY_DIR/pid" ]; then kill "$(cat "$XJOB_MY_DIR/pid")" 2>/dev/null || true; fi
  wait 2>/dev/null || true
  rm -rf "$XJOB_MY_DIR"
}

xjob_stop_databases() {
  xjob_stop_postgres
  xjob_stop_mariadb
}
