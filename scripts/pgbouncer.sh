#!/usr/bin/env bash
# A throw-away PgBouncer in transaction-pooling mode in front of the machine's PostgreSQL (127.0.0.1:5432, trust
# auth, user postgres), for running the server the way a pooled deployment does (CONTRACT §8).
#
#   scripts/pgbouncer.sh [start] [PORT]   start it (on PORT, or on a free port); prints postgres://postgres@127.0.0.1:PORT
#   scripts/pgbouncer.sh stop PORT|DIR    stop it and remove its directory
#
# Everything (config, auth file, pid file, log) lives in one directory, ${TMPDIR:-/tmp}/corkboard-pgbouncer-PORT,
# printed on stderr. Starting on a port whose PgBouncer is already running just prints its URL again; stopping one
# that is gone succeeds. Only the URL goes to stdout, so `url=$(scripts/pgbouncer.sh)` works.
# Environment: PGBOUNCER_UPSTREAM_HOST / PGBOUNCER_UPSTREAM_PORT (default 127.0.0.1 / 5432).
set -euo pipefail

UPSTREAM_HOST="${PGBOUNCER_UPSTREAM_HOST:-127.0.0.1}"
UPSTREAM_PORT="${PGBOUNCER_UPSTREAM_PORT:-5432}"
BASE="${TMPDIR:-/tmp}"
# PgBouncer refuses to run as root; this user owns the directory and the daemon.
RUN_AS=postgres

say() { echo "pgbouncer.sh: $*" >&2; }
die() { say "$*"; exit 1; }
dir_for() { echo "$BASE/corkboard-pgbouncer-$1"; }
# A pid file whose process is still a pgbouncer (a stale pid may have been reused by something else).
running_pid() {
  local pidfile="$1/pgbouncer.pid" pid
  [[ -s "$pidfile" ]] || return 1
  pid="$(cat "$pidfile")"
  [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
  if [[ -r "/proc/$pid/comm" ]]; then [[ "$(cat "/proc/$pid/comm")" == pgbouncer ]] || return 1; fi
  echo "$pid"
}
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

find_pgbouncer() {
  # Debian installs it in /usr/sbin, which is not on every PATH.
  PGBOUNCER="$(PATH="$PATH:/usr/sbin:/usr/local/sbin" command -v pgbouncer || true)"
  if [[ -z "$PGBOUNCER" ]]; then
    say "pgbouncer is not installed; installing Debian's package"
    [[ "$(id -u)" == 0 ]] || die "run as root to install pgbouncer (apt-get install -y pgbouncer)"
    # The package's own service (port 6432, /etc/pgbouncer) is not used; in a container it is not started anyway.
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer; } >&2 \
      || die "apt-get install pgbouncer failed"
    PGBOUNCER="$(PATH="$PATH:/usr/sbin:/usr/local/sbin" command -v pgbouncer)" || die "pgbouncer still not found"
  fi
}

write_config() {
  local dir="$1" port="$2"
  # trust still needs the user listed in the auth file (the password is never checked).
  printf '"postgres" ""\n' >"$dir/userlist.txt"
  cat >"$dir/pgbouncer.ini" <<EOF
[databases]
; Any database name the client asks for is forwarded to the same name upstream (the tests create many).
* = host=$UPSTREAM_HOST port=$UPSTREAM_PORT

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
; No Unix socket: two instances on one machine must not fight over /tmp/.s.PGSQL.<port>.
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
; SHOW CLIENTS / SHOW POOLS through: psql postgres://postgres@127.0.0.1:$port/pgbouncer
admin_users = postgres
stats_users = postgres
pool_mode = transaction
max_client_conn = 2000
default_pool_size = 20
; node-postgres sends extra_float_digits; "options" carries -c settings that a pooled server connection cannot
; honour per client, so it is dropped instead of refused.
ignore_startup_parameters = extra_float_digits,options
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
EOF
  : >"$dir/pgbouncer.log"
  if [[ "$(id -u)" == 0 ]]; then chown -R "$RUN_AS" "$dir"; fi
}

start_on() {
  local port="$1" dir pid
  dir="$(dir_for "$port")"
  if pid="$(running_pid "$dir")" && listening "$port"; then
    say "already running on port $port (pid $pid, dir $dir)"
    echo "postgres://postgres@127.0.0.1:$port"
    return 0
  fi
  listening "$port" && { say "port $port is taken by something else"; return 2; }
  rm -rf "$dir"
  mkdir -p "$dir"
  write_config "$dir" "$port"
  local -a run=("$PGBOUNCER" -d)
  if [[ "$(id -u)" == 0 ]]; then run+=(-u "$RUN_AS"); fi
  if ! "${run[@]}" "$dir/pgbouncer.ini" 2>"$dir/start.log"; then
    tail -n 20 "$dir/start.log" "$dir/pgbouncer.log" >&2 || true
    grep -qs "Address already in use" "$dir/start.log" "$dir/pgbouncer.log" && return 2
    return 1
  fi
  for _ in $(seq 50); do
    if running_pid "$dir" >/dev/null && listening "$port"; then
      say "running on port $port (pid $(running_pid "$dir"), dir $dir)"
      echo "postgres://postgres@127.0.0.1:$port"
      return 0
    fi
    sleep 0.1
  done
  tail -n 20 "$dir/start.log" "$dir/pgbouncer.log" >&2 || true
  grep -qs "Address already in use" "$dir/start.log" "$dir/pgbouncer.log" && return 2
  return 1
}

start() {
  find_pgbouncer
  if [[ $# -gt 0 ]]; then
    [[ "$1" =~ ^[0-9]+$ ]] || die "not a port: $1"
    start_on "$1" || die "could not start on port $1"
    return
  fi
  # A random port that nothing answers on; if another process takes it first, try another.
  local attempt port status
  for attempt in 1 2 3 4 5; do
    port=$((20000 + RANDOM % 30000))
    listening "$port" && continue
    status=0
    start_on "$port" || status=$?
    [[ $status == 0 ]] && return 0
    [[ $status == 2 ]] || die "could not start (see above)"
    say "port $port was taken (attempt $attempt); trying another"
  done
  die "no free port found"
}

stop() {
  [[ $# == 1 ]] || die "usage: $0 stop PORT|DIR"
  local dir="$1" pid
  [[ "$dir" =~ ^[0-9]+$ ]] && dir="$(dir_for "$dir")"
  [[ "$(basename "$dir")" == corkboard-pgbouncer-* ]] || die "not a directory this script made: $dir"
  if pid="$(running_pid "$dir")"; then
    # SIGTERM: immediate shutdown (SIGINT would wait for every client to finish).
    kill -TERM "$pid"
    for _ in $(seq 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
    say "stopped pid $pid"
  fi
  rm -rf "$dir"
}

case "${1:-start}" in
  start) shift $(($# > 0 ? 1 : 0)); start "$@" ;;
  stop) shift; stop "$@" ;;
  [0-9]*) start "$@" ;;
  *) die "usage: $0 [start] [PORT] | stop PORT|DIR" ;;
esac
