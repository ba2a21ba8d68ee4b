#!/usr/bin/env bash
# Make sure the Postgres and Redis the test suite uses are reachable: start them if installed,
# install them with apt when missing and running as root, otherwise say exactly what is needed.
# Also the Chromium the console's browser tests drive (tests/browser/; Playwright cannot download its own).
#   PERDURA_TEST_PG_HOST/PORT (default 127.0.0.1:5432), PERDURA_TEST_REDIS_HOST/PORT (127.0.0.1:6379),
#   PERDURA_TEST_CHROMIUM (default /usr/bin/chromium)
set -euo pipefail
PG_HOST="${PERDURA_TEST_PG_HOST:-127.0.0.1}"
PG_PORT="${PERDURA_TEST_PG_PORT:-5432}"
REDIS_HOST="${PERDURA_TEST_REDIS_HOST:-127.0.0.1}"
REDIS_PORT="${PERDURA_TEST_REDIS_PORT:-6379}"
CHROMIUM="${PERDURA_TEST_CHROMIUM:-/usr/bin/chromium}"

reachable() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }
is_root() { [ "$(id -u)" = 0 ]; }
wait_for() { for _ in $(seq 1 50); do reachable "$1" "$2" && return 0; sleep 0.2; done; return 1; }
apt_install() {
  if ! is_root || ! command -v apt-get >/dev/null 2>&1; then return 1; fi
  echo "installing $* with apt-get..."
  # Another install holding dpkg's lock (an unattended upgrade, a parallel make) is waited for, not failed on.
  local wait=(-o DPkg::Lock::Timeout=600)
  DEBIAN_FRONTEND=noninteractive apt-get "${wait[@]}" update -qq && DEBIAN_FRONTEND=noninteractive apt-get "${wait[@]}" install -y -qq --no-install-recommends "$@" >/dev/null
}

ensure_postgres() {
  reachable "$PG_HOST" "$PG_PORT" && return 0
  if [ "$PG_HOST" != 127.0.0.1 ] && [ "$PG_HOST" != localhost ]; then
    echo "Postgres at $PG_HOST:$PG_PORT is not reachable; start it or set PERDURA_TEST_PG_HOST/PORT." >&2; return 1
  fi
  if ! command -v pg_ctlcluster >/dev/null 2>&1; then
    apt_install postgresql || { echo "Postgres is not installed. Install it (apt-get install postgresql) and start it, or run make test as root so it can be installed." >&2; return 1; }
  fi
  version=$(ls /etc/postgresql | sort -V | tail -1)
  echo "starting Postgres $version..."
  if is_root; then pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  else pg_ctlcluster "$version" main start || true; fi
  wait_for "$PG_HOST" "$PG_PORT" || { echo "Postgres did not come up on $PG_HOST:$PG_PORT." >&2; return 1; }
}

ensure_redis() {
  reachable "$REDIS_HOST" "$REDIS_PORT" && return 0
  if ! command -v redis-server >/dev/null 2>&1; then
    apt_install redis-server || { echo "Redis is not installed. Install it (apt-get install redis-server) and start it, or run make test as root." >&2; return 1; }
  fi
  echo "starting Redis on $REDIS_HOST:$REDIS_PORT..."
  redis-server --daemonize yes --bind "$REDIS_HOST" --port "$REDIS_PORT" --save "" --appendonly no >/dev/null
  wait_for "$REDIS_HOST" "$REDIS_PORT" || { echo "Redis did not come up on $REDIS_HOST:$REDIS_PORT." >&2; return 1; }
}

ensure_chromium() {
  [ -x "$CHROMIUM" ] && return 0
  if [ "$CHROMIUM" != /usr/bin/chromium ]; then
    echo "Chromium is not at $CHROMIUM (PERDURA_TEST_CHROMIUM)." >&2; return 1
  fi
  apt_install chromium || { echo "Chromium is not installed. Install it (apt-get install chromium), or run make test as root so it can be installed." >&2; return 1; }
  [ -x "$CHROMIUM" ] || { echo "apt installed chromium but $CHROMIUM is missing." >&2; return 1; }
}

ensure_postgres
ensure_redis
ensure_chromium
echo "services: Postgres $PG_HOST:$PG_PORT and Redis $REDIS_HOST:$REDIS_PORT are up; Chromium at $CHROMIUM"
