#!/usr/bin/env bash
# Installs what zarena's build and tests need from Debian's packages, only when missing.
# Go comes from bookworm-backports: the suite is enabled by reusing the Debian mirror
# URI this machine's apt sources already name (no host name is written here).
set -euo pipefail

need_pkgs=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for p in cmake g++ make pkg-config libspdlog-dev libfmt-dev libgtest-dev libgmock-dev \
  libbenchmark-dev abigail-tools python3 python3-pip clang-format golang-1.23-go nlohmann-json3-dev \
  libcli11-dev; do
  have_pkg "$p" || need_pkgs+=("$p")
done
if [ ${#need_pkgs[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

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

if printf '%s\n' "${need_pkgs[@]}" | grep -q '^golang-1.23-go$'; then
  if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    uri=$(debian_uri)
    if [ -z "$uri" ]; then
      echo "deps.sh: no Debian bookworm source found in apt sources; cannot enable backports" >&2
      exit 1
    fi
    printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$uri" | $SUDO tee /etc/apt/sources.list.d/zarena-backports.sources >/dev/null
  fi
fi

echo "deps.sh: installing ${need_pkgs[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
