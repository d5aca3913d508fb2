#!/usr/bin/env bash
# Builds the suite and installs every binary of it together (snowpea, snowpea-gateway,
# snowpea-svc-*, snowpea-bench) into one bin directory, so `snowpea` finds its services
# beside itself (supervisor/src/bins.rs).
#
#   scripts/install.sh [--prefix DIR] [--debug] [--no-build]
#
#   --prefix DIR  install into DIR/bin (default: $CARGO_INSTALL_ROOT, else $CARGO_HOME, else
#                 ~/.cargo — the directory rustup already put on PATH)
#   --debug       install the debug build (target/debug) instead of the release build
#   --no-build    copy what is already built (honours CARGO_TARGET_DIR)
#
# A release build takes about 9.5 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."

prefix="${CARGO_INSTALL_ROOT:-${CARGO_HOME:-$HOME/.cargo}}"
profile=release
build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="${2:?--prefix needs a directory}"; shift 2 ;;
    --prefix=*) prefix="${1#--prefix=}"; shift ;;
    --debug) profile=debug; shift ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

if [ "$build" = 1 ]; then
  if [ "$profile" = release ]; then
    cargo build --release --workspace --bins
  else
    cargo build --workspace --bins
  fi
fi

from="${CARGO_TARGET_DIR:-target}/$profile"
# Every binary of the suite: the executables named snowpea* that the build left there.
bins=$(find "$from" -maxdepth 1 -type f -perm -u+x -name 'snowpea*' ! -name '*.*' -exec basename {} \; | sort)
case "$bins" in
  *snowpea-svc-session*) ;;
  *) echo "install.sh: the suite is not built in $from (run without --no-build)" >&2; exit 1 ;;
esac
mkdir -p "$prefix/bin"
for b in $bins; do
  install -m 0755 "$from/$b" "$prefix/bin/$b.tmp"
  mv -f "$prefix/bin/$b.tmp" "$prefix/bin/$b"
done
echo "installed $(echo "$bins" | wc -l | tr -d ' ') binaries into $prefix/bin"
case ":$PATH:" in
  *":$prefix/bin:"*) ;;
  *) echo "note: $prefix/bin is not on PATH; add it, or run $prefix/bin/snowpea" >&2 ;;
esac
