#!/usr/bin/env bash
# Builds libpoplar_host.a into the folder given as $1 (objects in $1/obj).
# Incremental: a source is recompiled only when it, or any header of the
# library, is newer than its object. Uses as many jobs as cores (at most 4).
# Environment: CXX (default g++), CXXFLAGS (default -O2).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:?usage: build.sh <output-folder>}"
mkdir -p "$out/obj"
out="$(cd "$out" && pwd)"
cxx="${CXX:-g++}"
flags="${CXXFLAGS:--O2} -std=c++17 -fPIC -Wall -Wextra -I$here/include -I$here/src"

newest_header=$(find "$here/include" "$here/src" -name '*.hpp' -printf '%T@\n' | sort -n | tail -1)
jobs=$(nproc 2>/dev/null || echo 2)
[ "$jobs" -gt 4 ] && jobs=4

stale=()
for src in "$here"/src/*.cpp; do
  obj="$out/obj/$(basename "${src%.cpp}").o"
  if [ ! -f "$obj" ]; then stale+=("$src"); continue; fi
  objTime=$(stat -c '%Y' "$obj")
  srcTime=$(stat -c '%Y' "$src")
  if [ "$srcTime" -ge "$objTime" ] || [ "${newest_header%.*}" -ge "$objTime" ]; then stale+=("$src"); fi
done

if [ "${#stale[@]}" -gt 0 ]; then
  printf '%s\n' "${stale[@]}" | xargs -P "$jobs" -I{} sh -c \
    'src="$1"; obj="$2/obj/$(basename "${src%.cpp}").o"; '"$cxx $flags"' -c "$src" -o "$obj.tmp" && mv "$obj.tmp" "$obj"' \
    _ {} "$out"
fi

lib="$out/libpoplar_host.a"
if [ "${#stale[@]}" -gt 0 ] || [ ! -f "$lib" ]; then
  rm -f "$lib.tmp"
  ar rcs "$lib.tmp" "$out"/obj/*.o
  mv "$lib.tmp" "$lib"
fi
echo "$lib"
