# Run by scripts/test: the Debian packages the tests use beside the Python environment, installed when missing
# and we are root (CI); otherwise one line says what to install. PostgreSQL 15 + PostGIS 3 for the tests that
# load into PostgreSQL (tests/support/postgres.py); Chromium for the team page's browser test
# (tests/page/test_team_page.py: Debian's browser, never one a library downloads). One apt-get for both.
# scripts/demo needs neither.
set -euo pipefail
packages=()
if [ ! -x /usr/lib/postgresql/15/bin/initdb ] || [ ! -f /usr/share/postgresql/15/extension/postgis.control ]; then
  packages+=(postgresql-15 postgresql-15-postgis-3)
fi
command -v chromium >/dev/null || packages+=(chromium)
[ ${#packages[@]} = 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  # an image with no package lists (or stale ones) cannot find the packages: refresh them first
  apt-cache show "${packages[@]}" >/dev/null 2>&1 || apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null \
    || { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null; }
else
  echo "note: the tests need these Debian packages: sudo apt-get install -y ${packages[*]}" >&2
fi
