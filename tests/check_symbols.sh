#!/usr/bin/env bash
# Symbol hygiene of libzarena.so: the dynamic symbol table holds exactly the functions the
# public header declares, each versioned ZARENA_<major>; the SONAME carries the major; the
# only runtime dependencies are the C/C++ runtime (no libcudart.so, libfmt, libspdlog).
# usage: check_symbols.sh <libzarena.so> <zarena.h> <major>
set -euo pipefail
lib=$1 header=$2 major=$3
node="ZARENA_${major}"
fail=0
err() { echo "FAIL: $*" >&2; fail=1; }

for tool in nm readelf; do
  command -v "$tool" >/dev/null || { echo "$tool not found" >&2; exit 1; }
done

defined=$(nm -D --defined-only "$lib" | awk '{print $NF}')
[ -n "$defined" ] || err "no defined dynamic symbols in $lib"
exported=()
while read -r sym; do
  [ -z "$sym" ] && continue
  if [ "$sym" = "$node" ]; then continue; fi  # the version node itself
  name=${sym%%@*}
  case "$name" in
    zarena_*) ;;
    *) err "exported symbol outside the zarena_ prefix: $sym"; continue ;;
  esac
  case "$sym" in
    "$name@@$node") ;;
    *) err "symbol not versioned $node: $sym" ;;
  esac
  exported+=("$name")
done <<<"$defined"
grep -qx "$node" <<<"$defined" || err "version node $node missing (version script not applied?)"

# Every function the header declares is exported, and nothing else.
declared=$(tr '\n' ' ' <"$header" | grep -o 'ZARENA_API[^;(]*(' |
  grep -o 'zarena_[a-z0-9_]*[[:space:]]*($' | tr -d ' (' | sort -u)
got=$(printf '%s\n' "${exported[@]}" | sort -u)
missing=$(comm -23 <(echo "$declared") <(echo "$got"))
extra=$(comm -13 <(echo "$declared") <(echo "$got"))
[ -z "$missing" ] || err "declared in the header but not exported: $(echo $missing)"
[ -z "$extra" ] || err "exported but not declared in the header: $(echo $extra)"
[ "$(echo "$declared" | wc -l)" -ge 10 ] || err "parsed too few declarations from $header"

soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libzarena.so.$major" ] || err "SONAME is '$soname', want libzarena.so.$major"

needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
while read -r dep; do
  [ -z "$dep" ] && continue
  case "$dep" in
    libc.so.* | libstdc++.so.* | libm.so.* | libgcc_s.so.* | libpthread.so.* | libdl.so.* | \
      librt.so.* | ld-linux*.so.*) ;;
    *) err "unexpected runtime dependency: $dep" ;;
  esac
done <<<"$needed"

echo "exported ($node): ${exported[*]}"
echo "SONAME: $soname; NEEDED: $(echo $needed)"
[ "$fail" = 0 ] && echo "symbol hygiene OK"
exit "$fail"
