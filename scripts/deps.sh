#!/usr/bin/env bash
# Installs what zarena's build and tests need from Debian's packages, only when missing.
# Before it changes anything it says what it will do: the packages, whether through sudo
# (when you are not root), and, for Go, the apt source it writes. Go comes from
# bookworm-backports: the suite is enabled by reusing the Debian mirror URI this machine's
# apt sources already name (no host name is written here).
#   scripts/deps.sh            install what is missing
#   scripts/deps.sh --check    only say what is missing (exit 1 when something is)
# Off Debian (no dpkg-query or apt-get) it installs nothing: it prints what the build needs
# and returns, and CMake then names anything still missing.
set -euo pipefail

CHECK_ONLY=0
case "${1:-}" in
  --check) CHECK_ONLY=1 ;;
  "") ;;
  *) echo "usage: scripts/deps.sh [--check]" >&2; exit 2 ;;
esac

PKGS=(cmake g++ make pkg-config libspdlog-dev libfmt-dev libgtest-dev libgmock-dev
  libbenchmark-dev abigail-tools python3 python3-pip python3-venv clang-format golang-1.23-go
  nlohmann-json3-dev libcli11-dev)
GO_BIN=/usr/lib/go-1.23/bin

if ! command -v dpkg-query >/dev/null || ! command -v apt-get >/dev/null; then
  cat >&2 <<MSG
deps.sh: not a Debian-like system (no dpkg-query/apt-get): installing nothing.
  The build needs CMake >= 3.22, a C++17 compiler, make, pkg-config, spdlog, fmt,
  nlohmann-json and CLI11; the tests also GoogleTest/GoogleMock, Google Benchmark,
  libabigail (abidw, abidiff), clang-format, python3 with pip and Go >= 1.23.
  (Debian names: ${PKGS[*]})
MSG
  exit 0
fi

need_pkgs=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for p in "${PKGS[@]}"; do
  have_pkg "$p" || need_pkgs+=("$p")
done
if [ ${#need_pkgs[@]} -eq 0 ]; then
  exit 0
fi
if [ "$CHECK_ONLY" = 1 ]; then
  echo "deps.sh: missing: ${need_pkgs[*]}"
  exit 1
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
as_root() { if [ -n "$SUDO" ]; then echo "with sudo (you are not root)"; else echo "as root"; fi; }

debian_uri() {
  # First URI serving the plain Debian archive (a "bookworm" suite), from deb822 or one-line sources.
  local f uri
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    uri=$(awk '/^URIs:/{u=$2} /^Suites:/{ for(i=2;i<=NF;i++) if($i=="bookworm"){print u; exit} }' "$f")
    if [ -n "$uri" ]; then echo "$uri"; return; fi
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    uri=$(awk '$1=="deb" && $0 ~ / bookworm / { for(i=2;i<=NF;i++) if($i ~ /^[a-z]+:\/\//){print $i; exit} }' "$f")
    if [ -n "$uri" ]; then echo "$uri"; return; fi
  done
}

backports_source=""
if printf '%s\n' "${need_pkgs[@]}" | grep -q '^golang-1.23-go$'; then
  if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    uri=$(debian_uri)
    if [ -z "$uri" ]; then
      echo "deps.sh: golang-1.23-go needs Debian bookworm-backports, and no Debian bookworm" \
        "source was found in the apt sources to enable it from; install Go >= 1.23 yourself" >&2
      exit 1
    fi
    backports_source=/etc/apt/sources.list.d/zarena-backports.sources
  fi
fi

echo "deps.sh: missing Debian packages: ${need_pkgs[*]}"
echo "deps.sh: running apt-get update and apt-get install $(as_root)"
if [ -n "$backports_source" ]; then
  echo "deps.sh: golang-1.23-go is in bookworm-backports: writing $backports_source" \
    "(the Debian mirror your apt sources already use, suite bookworm-backports)"
  printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$uri" | $SUDO tee "$backports_source" >/dev/null
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
if printf '%s\n' "${need_pkgs[@]}" | grep -q '^golang-1.23-go$'; then
  echo "deps.sh: Go is installed in $GO_BIN, which is not on PATH;" \
    "for the Go examples: export PATH=$GO_BIN:\$PATH"
fi
