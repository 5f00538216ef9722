#!/usr/bin/env bash
# Uses the packages as someone outside the repository would: packs every workspace package,
# installs the tarballs into a new project in a temporary folder (their dependencies come from the
# registry), then imports them from plain ESM JavaScript (compiling and running a model on the
# emulated IPU) and from CommonJS, type-checks TypeScript against them, and runs the `tilegraph`
# command of the packed tools package. Needs the npm registry and g++; takes a minute or two.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
fixture="$repo/test/pack/fixture"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/tilegraph-pack.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
# the executable cache of this run, not the user's
export XDG_CACHE_HOME="$tmp/cache"

fail() {
  echo "pack test FAILED: $*" >&2
  exit 1
}
step() { echo "-- $* (${SECONDS}s)"; }

step "build"
(cd "$repo" && npx tsc -b) || fail "the build failed"

step "npm pack --workspaces"
mkdir "$tmp/tarballs" "$tmp/unpacked"
(cd "$repo" && npm pack --workspaces --pack-destination "$tmp/tarballs" >"$tmp/pack.out" 2>"$tmp/pack.err") ||
  { cat "$tmp/pack.err" >&2; fail "npm pack failed"; }
# the project's .npmrc holds only settings npm knows
if grep -q 'Unknown project config' "$tmp/pack.err"; then
  grep 'Unknown project config' "$tmp/pack.err" >&2
  fail "npm warns about the project's .npmrc"
fi
for t in "$tmp"/tarballs/*.tgz; do
  d="$tmp/unpacked/$(basename "$t" .tgz)"
  mkdir "$d" && tar xzf "$t" -C "$d" --strip-components=1
  echo "   $(basename "$t"): $(du -k "$t" | cut -f1) kB, $(tar tzf "$t" | wc -l) files"
done
node "$repo/test/pack/check-tarballs.mjs" "$tmp/unpacked" || fail "the tarballs are incomplete (above)"

step "install the tarballs into a new project"
app="$tmp/app"
mkdir "$app"
cp "$fixture"/* "$app"/
cd "$app"
npm init -y >/dev/null && npm pkg set type=module || fail "npm init failed"
# the TypeScript check uses the repository's versions of typescript and @types/node
ts_version="$(node -p "require('$repo/node_modules/typescript/package.json').version")"
types_version="$(node -p "require('$repo/node_modules/@types/node/package.json').version")"
npm install --no-audit --no-fund "$tmp"/tarballs/*.tgz "typescript@$ts_version" "@types/node@$types_version" ||
  fail "npm install of the tarballs failed"
npm ls --all >/dev/null || fail "the installed tree is incomplete or inconsistent (npm ls)"

step "plain ESM: compile and run a model"
node esm.mjs || fail "esm.mjs (importing the packages from JavaScript) failed"

step "CommonJS: require() the packages"
node require.cjs || fail "require.cjs (require() of the packages) failed"

step "TypeScript: tsc --noEmit, strict, nodenext"
node node_modules/typescript/bin/tsc -p tsconfig.json || fail "typed.mts does not type-check against the packages' types"

step "the tilegraph command"
# offline and --no: the command must come from the installed tools package, never the registry
tilegraph() { npx --offline --no -- tilegraph "$@"; }
version="$(tilegraph --version)" || fail "npx tilegraph --version failed"
[ "$version" = "$(node -p "require('@tilegraph/tools/package.json').version")" ] || fail "tilegraph --version printed '$version'"
tilegraph compile model.tg --pipeline inference --batch-size 4 -o tiny.tgx || fail "tilegraph compile failed"
tilegraph run tiny.tgx --json >compiled.json || fail "tilegraph run tiny.tgx failed"
tilegraph run model.tg --batch-size 4 --json >reference.json || fail "tilegraph run model.tg failed"
node -e '
  const fs = require("node:fs");
  const [got, want] = ["compiled.json", "reference.json"].map((f) => JSON.parse(fs.readFileSync(f, "utf8")));
  const g = got.outputs.probs, w = want.outputs.probs;
  if (JSON.stringify(g.shape) !== "[4,4]" || JSON.stringify(w.shape) !== "[4,4]") throw new Error(`shapes ${g.shape} and ${w.shape}`);
  const ref = w.data.flat();
  g.data.flat().forEach((v, i) => {
    if (!(Math.abs(v - ref[i]) <= 1e-6 + 1e-5 * Math.abs(ref[i]))) throw new Error(`probs[${i}]: executable ${v}, reference ${ref[i]}`);
  });
  console.log(`tilegraph: the exported executable (${got.backend}) gives the reference outputs (${want.backend})`);
' || fail "the executable's outputs differ from the reference interpreter's"

# the HTML report inlines dagre, found from the installed tools package
tilegraph report model.tg --pipeline inference --html report.html || fail "tilegraph report --html failed"
grep -q 'dagre' report.html || fail "the HTML report has no dagre bundle"

echo "pack test passed (${SECONDS}s)"
