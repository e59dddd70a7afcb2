#!/usr/bin/env bash
# The reference deployment on one machine (deploy/README.md): HAProxy in front of N corkboard processes, which reach
# PostgreSQL through PgBouncer in transaction mode and share Redis.
#
#   deploy/start.sh up [--processes N] [--port PORT]   start it; prints the URL on stdout, the state directory on stderr
#   deploy/start.sh down DIR                          stop everything it started (SIGTERM, as systemd would)
#
# Environment: DATABASE_DIRECT_URL (default postgres://postgres@127.0.0.1:5432/corkboard; the database must exist),
# REDIS_URL (default redis://127.0.0.1:6379), REDIS_KEY_PREFIX (default corkboard:), and any other corkboard
# setting, passed through to every process. PostgreSQL and Redis are expected to run already (on Debian:
# `apt-get install postgresql redis-server`); PgBouncer and HAProxy are Debian's packages, installed if missing.
# Needs a build: `npm ci && npm run build` first.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
say() { echo "deploy/start.sh: $*" >&2; }
die() { say "$*"; exit 1; }
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() {
  local port
  for _ in $(seq 50); do
    port=$((20000 + RANDOM % 30000))
    listening "$port" || { echo "$port"; return; }
  done
  die "no free port found"
}
# A port free_port found is only free when it was checked: another process can take it before ours binds (CI saw
# it happen). So each listener started on such a port is started again on another one when its bind fails with the
# port in use, at most this many times in all (scripts/pgbouncer.sh does the same for PgBouncer).
ATTEMPTS=5

need() {
  local command="$1" package="$2"
  PATH="$PATH:/usr/sbin" command -v "$command" >/dev/null && return
  [[ "$(id -u)" == 0 ]] || die "$command is missing: apt-get install $package"
  say "installing Debian's $package"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package"; } >&2 || die "apt-get install $package failed"
}

# The corkboard processes of up() (which sets processes, port, state, direct and pooled): one migrates (advisory
# lock on the direct connection) while the others wait for it. A process whose port was taken first exits with
# EADDRINUSE and is started again on another port.
start_process() {
  local i="$1" app_port="$2"
  (
    cd "$ROOT"
    export PORT="$app_port" HOST=127.0.0.1 DATABASE_URL="$pooled" DATABASE_DIRECT_URL="$direct" PG_PREPARED_STATEMENTS=off \
      REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379}" TRUST_PROXY=127.0.0.1 PUBLIC_URL="${PUBLIC_URL:-http://127.0.0.1:$port}"
    exec node --max-semi-space-size=8 --heap-growing-percent=50 dist/src/server.js >"$state/corkboard-$i.log" 2>&1
  ) &
  echo "$!" >"$state/corkboard-$i.pid"
  echo "$app_port" >"$state/corkboard-$i.port"
}

# 0 once process i answers /health, 1 if it exited, 2 if it is still not answering after 20 s.
wait_healthy() {
  local i="$1" app_port pid
  app_port="$(cat "$state/corkboard-$i.port")"
  pid="$(cat "$state/corkboard-$i.pid")"
  for _ in $(seq 200); do
    curl -fsS --max-time 2 "http://127.0.0.1:$app_port/health" >/dev/null 2>&1 && kill -0 "$pid" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 2
}

start_processes() {
  local i attempt status
  for i in $(seq "$processes"); do start_process "$i" "$(free_port)"; done
  for i in $(seq "$processes"); do
    for attempt in $(seq "$ATTEMPTS"); do
      status=0
      wait_healthy "$i" || status=$?
      [[ $status == 0 ]] && break
      if [[ $status == 1 && "$attempt" -lt "$ATTEMPTS" ]] && grep -qs EADDRINUSE "$state/corkboard-$i.log"; then
        say "corkboard-$i: port $(cat "$state/corkboard-$i.port") was taken before it bound it (attempt $attempt); trying another"
        start_process "$i" "$(free_port)"
        continue
      fi
      tail -n 20 "$state/corkboard-$i.log" >&2
      down "$state"
      [[ $status == 1 ]] && die "corkboard-$i exited"
      die "corkboard-$i is not healthy"
    done
  done
}

server_lines() {
  local i
  for i in $(seq "$processes"); do echo "    server corkboard-$i 127.0.0.1:$(cat "$state/corkboard-$i.port") check"; done
}

up() {
  local processes=2 port="" fixed_port=""
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --processes) processes="$2"; shift 2 ;;
      --port) port="$2"; fixed_port="$2"; shift 2 ;;
      *) die "unknown option: $1" ;;
    esac
  done
  [[ "$processes" =~ ^[1-9][0-9]?$ ]] || die "--processes must be 1 to 99"
  [[ -f "$ROOT/dist/src/server.js" ]] || die "no build: run npm ci && npm run build first"
  need haproxy haproxy
  port="${port:-$(free_port)}"
  local direct="${DATABASE_DIRECT_URL:-postgres://postgres@127.0.0.1:5432/corkboard}"
  local state
  state="$(mktemp -d "${TMPDIR:-/tmp}/corkboard-deploy-XXXXXX")"
  say "state in $state"

  # PgBouncer (scripts/pgbouncer.sh) in front of the same server, transaction pooling.
  local upstream pooler pooled
  upstream="$(node -e 'const u = new URL(process.argv[1]); console.log(`${u.hostname} ${u.port || 5432}`)' "$direct")"
  pooler="$(PGBOUNCER_UPSTREAM_HOST="${upstream% *}" PGBOUNCER_UPSTREAM_PORT="${upstream#* }" "$ROOT/scripts/pgbouncer.sh" start)"
  echo "${pooler##*:}" >"$state/pgbouncer.port"
  pooled="$(node -e 'const u = new URL(process.argv[1]); const p = new URL(process.argv[2]); u.hostname = p.hostname; u.port = p.port; console.log(u.toString())' "$direct" "$pooler")"

  # The processes, then HAProxy in front of them. The processes are told HAProxy's port (PUBLIC_URL), so when
  # HAProxy's bind finds that port taken they are started again with another one.
  local attempt
  for attempt in $(seq "$ATTEMPTS"); do
    start_processes
    SERVERS="$(server_lines)"$'\n' BIND="127.0.0.1:$port" node -e '
      const fs = require("fs");
      const text = fs.readFileSync(process.argv[1], "utf8").replace("@BIND@", process.env.BIND).replace("@SERVERS@\n", process.env.SERVERS);
      fs.writeFileSync(process.argv[2], text);' "$ROOT/deploy/haproxy.cfg.in" "$state/haproxy.cfg"
    PATH="$PATH:/usr/sbin" haproxy -c -q -f "$state/haproxy.cfg" >&2 || { down "$state"; die "haproxy.cfg is not valid"; }
    PATH="$PATH:/usr/sbin" haproxy -D -f "$state/haproxy.cfg" -p "$state/haproxy.pid" 2>"$state/haproxy.log" && break
    if [[ -z "$fixed_port" && "$attempt" -lt "$ATTEMPTS" ]] && grep -qs "Address already in use" "$state/haproxy.log"; then
      say "port $port was taken before HAProxy bound it (attempt $attempt); starting again on another"
      stop_processes "$state"
      port="$(free_port)"
      continue
    fi
    cat "$state/haproxy.log" >&2
    down "$state"
    die "HAProxy did not start on $port"
  done
  for _ in $(seq 100); do
    curl -fsS --max-time 2 "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
    sleep 0.1
  done
  curl -fsS --max-time 2 "http://127.0.0.1:$port/health" >/dev/null || { down "$state"; die "HAProxy does not answer on $port"; }
  say "HAProxy on 127.0.0.1:$port in front of $processes processes"
  echo "$state" >&2
  echo "http://127.0.0.1:$port"
}

# SIGTERM to every corkboard process in DIR, as systemd would, then SIGKILL to any still running after 20 s.
stop_processes() {
  local state="$1" pidfile pid
  for pidfile in "$state"/corkboard-*.pid; do
    [[ -s "$pidfile" ]] || continue
    pid="$(cat "$pidfile")"
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pidfile in "$state"/corkboard-*.pid; do
    [[ -s "$pidfile" ]] || continue
    pid="$(cat "$pidfile")"
    for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
}

down() {
  [[ $# == 1 ]] || die "usage: $0 down DIR"
  local state="$1"
  [[ "$(basename "$state")" == corkboard-deploy-* && -d "$state" ]] || die "not a directory this script made: $state"
  if [[ -s "$state/haproxy.pid" ]]; then kill -TERM "$(cat "$state/haproxy.pid")" 2>/dev/null || true; fi
  stop_processes "$state"
  if [[ -s "$state/pgbouncer.port" ]]; then "$ROOT/scripts/pgbouncer.sh" stop "$(cat "$state/pgbouncer.port")" || true; fi
  rm -rf "$state"
  say "stopped"
}

case "${1:-up}" in
  up) shift || true; up "$@" ;;
  down) shift; down "$@" ;;
  *) die "usage: $0 up [--processes N] [--port PORT] | down DIR" ;;
esac
