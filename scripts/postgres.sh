# Sourced by scripts/test: the tests that load into PostgreSQL run a real PostgreSQL 15 + PostGIS 3 server
# (tests/postgres_server.py). Installs the two Debian packages when they are missing and we are root
# (CI); otherwise says in one line what to install. scripts/demo does not need it: Postgres is optional.
pg_packages="postgresql-15 postgresql-15-postgis-3"
if [ ! -x /usr/lib/postgresql/15/bin/initdb ] || [ ! -f /usr/share/postgresql/15/extension/postgis.control ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    # an image with no package lists (or stale ones) cannot find the packages: refresh them first
    apt-cache show postgresql-15-postgis-3 >/dev/null 2>&1 || apt-get update -qq
    # shellcheck disable=SC2086  # one word per package
    apt-get install -y -qq --no-install-recommends $pg_packages >/dev/null \
      || { apt-get update -qq && apt-get install -y -qq --no-install-recommends $pg_packages >/dev/null; }
  else
    echo "note: the PostgreSQL tests need PostgreSQL 15 with PostGIS 3: sudo apt-get install -y $pg_packages" >&2
  fi
fi
