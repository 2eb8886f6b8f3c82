#!/usr/bin/env bash
# Symbol hygiene of libzarena.so: the dynamic symbol table holds exactly the functions the
# public headers declare (zarena.h, zarena_testing.h), each in the version node that
# cmake/zarena.map names for it (ZARENA_<major>, ZARENA_<major>.<minor> or
# ZARENA_EXPERIMENTAL; the map lists every function by name, no wildcards); the SONAME
# carries the major; the only runtime dependencies are the C/C++ runtime (no libcudart.so,
# libfmt, libspdlog).
# usage: check_symbols.sh <libzarena.so> <header, or folder of headers> <major> <zarena.map>
set -euo pipefail
lib=$1 header=$2 major=$3 map=$4
node="ZARENA_${major}"
fail=0
err() { echo "FAIL: $*" >&2; fail=1; }

# "<name> <node>" for every name in a global: section of the map (comments removed).
map_entries() {
  sed -e ':a;N;$!ba' -e 's|/\*[^*]*\*\+\([^/*][^*]*\*\+\)*/||g' "$map" |
    sed -e 's/\([{};:]\)/ \1 /g' | awk '
    { for (i = 1; i <= NF; i++) tok[++n] = $i }
    END {
      for (i = 1; i <= n; i++) {
        t = tok[i]
        if (t == "{") { node = prev; inside = 1; section = ""; continue }
        if (t == "}") { inside = 0; continue }
        if (!inside) { prev = t; continue }
        if ((t == "global" || t == "local") && tok[i + 1] == ":") { section = t; i++; continue }
        if (t == ";") continue
        if (section == "global") print t, node
      }
    }'
}
declare -A node_of=()
while read -r name n; do
  [ -z "$name" ] && continue
  case "$name" in *'*'* | *'?'* | *'['*) err "wildcard '$name' in $map (list names)"; continue ;; esac
  case "$n" in
    "$node" | "$node".[0-9]* | ZARENA_EXPERIMENTAL) ;;
    *) err "version node '$n' in $map is not $node, $node.<minor> or ZARENA_EXPERIMENTAL" ;;
  esac
  [ -n "${node_of[$name]:-}" ] && err "$name is listed twice in $map"
  node_of[$name]=$n
done < <(map_entries)
[ "${#node_of[@]}" -gt 0 ] || err "no names parsed from $map"
declare -A is_node=()
for n in "${node_of[@]}"; do is_node[$n]=1; done

for tool in nm readelf; do
  command -v "$tool" >/dev/null || { echo "$tool not found" >&2; exit 1; }
done

defined=$(nm -D --defined-only "$lib" | awk '{print $NF}')
[ -n "$defined" ] || err "no defined dynamic symbols in $lib"
exported=()
while read -r sym; do
  [ -z "$sym" ] && continue
  if [ -n "${is_node[$sym]:-}" ]; then continue; fi  # a version node's own definition
  name=${sym%%@*}
  case "$name" in
    zarena_*) ;;
    *) err "exported symbol outside the zarena_ prefix: $sym"; continue ;;
  esac
  want=${node_of[$name]:-}
  if [ -z "$want" ]; then
    err "exported but not listed in $map: $sym"
  elif [ "$sym" != "$name@@$want" ]; then
    err "symbol $sym should be $name@@$want (as $map says)"
  fi
  exported+=("$name")
done <<<"$defined"
grep -qx "$node" <<<"$defined" || err "version node $node missing (version script not applied?)"

# Every function the headers declare is exported, and nothing else.
headers=("$header")
[ -d "$header" ] && headers=("$header"/*.h)
declared=$(cat "${headers[@]}" | tr '\n' ' ' | grep -o 'ZARENA_API[^;(]*(' |
  grep -o 'zarena_[a-z0-9_]*[[:space:]]*($' | tr -d ' (' | sort -u)
got=$(printf '%s\n' "${exported[@]}" | sort -u)
missing=$(comm -23 <(echo "$declared") <(echo "$got"))
extra=$(comm -13 <(echo "$declared") <(echo "$got"))
[ -z "$missing" ] || err "declared in the header but not exported: $(echo $missing)"
[ -z "$extra" ] || err "exported but not declared in the header: $(echo $extra)"
[ "$(echo "$declared" | wc -l)" -ge 10 ] || err "parsed too few declarations from ${headers[*]}"

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

for n in $(printf '%s\n' "${!is_node[@]}" | sort); do
  echo "node $n: $(for k in "${!node_of[@]}"; do [ "${node_of[$k]}" = "$n" ] && echo "$k"; done |
    sort | tr '\n' ' ')"
done
# No initial-exec thread-locals: they mark the library STATIC_TLS, and dlopen (Python,
# Go's run-time loading) then fails with "cannot allocate memory in static TLS block".
if readelf -d "$lib" | grep -q 'STATIC_TLS'; then
  err "the library is flagged STATIC_TLS (an initial-exec thread-local): dlopen would fail"
fi
echo "SONAME: $soname; NEEDED: $(echo $needed)"
[ "$fail" = 0 ] && echo "symbol hygiene OK"
exit "$fail"
