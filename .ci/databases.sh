#!/usr/bin/env bash
# Starts PostgreSQL 15 and MariaDB on free loopback ports in throw-away directories, for the
# store conformance suite and the cluster tests. Source it, then call the functions:
#   xjob_install_databases   apt-installs what is missing
#   xjob_start_postgres      exports XJOB_TEST_POSTGRES_URL  postgres://xjob:xjob@127.0.0.1:PORT/xjob
#                            and XJOB_TEST_POSTGRES_CTL, a command taking
#                            start|stop|restart|checkpoint
#                            (admin/tests/it/cluster.rs restarts the server under load with it)
#   xjob_start_mariadb       exports XJOB_TEST_MYSQL_URL     mysql://xjob:xjob@127.0.0.1:PORT/xjob
#   xjob_stop_databases      stops both and deletes their directories
# The caller stops them on exit (.ci/run calls xjob_stop_databases from its EXIT trap).
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
  # One control command with the server's options baked in, so `stop` then `start` brings the
  # same server back on the same port (pg_ctl start alone would fall back to the defaults).
  # `checkpoint` flushes dirty buffers first, so a following `stop` takes a moment, not the
  # tens of seconds a shutdown checkpoint takes after a test suite created many databases.
  cat >"$XJOB_PG_DIR/ctl" <<CTL
#!/bin/sh
# usage: ctl start|stop|restart|checkpoint
case "\$1" in
  checkpoint) exec psql -h 127.0.0.1 -p $port -U postgres -q -c CHECKPOINT ;;
  *) exec su postgres -s /bin/sh -c "$bin/pg_ctl -D $XJOB_PG_DIR/data -l $XJOB_PG_DIR/log -w -m fast \\
       -o '-h 127.0.0.1 -p $port -k $XJOB_PG_DIR -c fsync=on -c max_connections=300' \$1 >/dev/null" ;;
esac
CTL
  chmod +x "$XJOB_PG_DIR/ctl"
  "$XJOB_PG_DIR/ctl" start
  psql -h 127.0.0.1 -p "$port" -U postgres -q -c "CREATE USER xjob PASSWORD 'xjob' CREATEDB" \
    -c "CREATE DATABASE xjob OWNER xjob" >/dev/null
  export XJOB_TEST_POSTGRES_URL="postgres://xjob:xjob@127.0.0.1:$port/xjob"
  export XJOB_TEST_POSTGRES_CTL="$XJOB_PG_DIR/ctl"
  echo "postgresql on 127.0.0.1:$port"
}

xjob_stop_postgres() {
  [ -n "${XJOB_PG_DIR:-}" ] || return 0
  "$XJOB_PG_DIR/ctl" stop 2>/dev/null || true
  rm -rf "$XJOB_PG_DIR"
  unset XJOB_PG_DIR XJOB_TEST_POSTGRES_URL XJOB_TEST_POSTGRES_CTL
}

xjob_start_mariadb() {
  XJOB_MY_DIR=$(mktemp -d /tmp/xjob-mariadb.XXXXXX)
  local port; port=$(xjob_free_port)
  mariadb-install-db --no-defaults --user=root --datadir="$XJOB_MY_DIR/data" \
    --auth-root-authentication-method=normal >/dev/null 2>&1
  mariadbd --no-defaults --user=root --datadir="$XJOB_MY_DIR/data" --socket="$XJOB_MY_DIR/sock" \
    --bind-address=127.0.0.1 --port="$port" --pid-file="$XJOB_MY_DIR/pid" \
    --max-connections=300 --log-error="$XJOB_MY_DIR/log" >"$XJOB_MY_DIR/stdout" 2>&1 &
  local tries=0
  until mariadb --no-defaults -uroot --socket="$XJOB_MY_DIR/sock" -e 'SELECT 1' >/dev/null 2>&1; do
    tries=$((tries + 1))
    if [ $tries -gt 100 ]; then echo "mariadb did not start:"; cat "$XJOB_MY_DIR/log"; return 1; fi
    sleep 0.2
  done
  mariadb --no-defaults -uroot --socket="$XJOB_MY_DIR/sock" -e \
    "CREATE DATABASE xjob; CREATE USER 'xjob'@'%' IDENTIFIED BY 'xjob'; GRANT ALL ON *.* TO 'xjob'@'%';
     CREATE USER 'xjob'@'localhost' IDENTIFIED BY 'xjob'; GRANT ALL ON *.* TO 'xjob'@'localhost';"
  export XJOB_TEST_MYSQL_URL="mysql://xjob:xjob@127.0.0.1:$port/xjob"
  echo "mariadb on 127.0.0.1:$port"
}

xjob_stop_mariadb() {
  [ -n "${XJOB_MY_DIR:-}" ] || return 0
  if [ -f "$XJOB_MY_DIR/pid" ]; then kill "$(cat "$XJOB_MY_DIR/pid")" 2>/dev/null || true; fi
  wait 2>/dev/null || true
  rm -rf "$XJOB_MY_DIR"
  unset XJOB_MY_DIR XJOB_TEST_MYSQL_URL
}

xjob_stop_databases() {
  xjob_stop_postgres
  xjob_stop_mariadb
}
