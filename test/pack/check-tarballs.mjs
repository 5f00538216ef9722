// Checks the unpacked tarballs of every package (node check-tarballs.mjs DIR, one folder per
// package): the entry points named in package.json are in the tarball; no tests, source maps or
// build info are; every module a shipped file imports is either shipped, a Node built-in or a
// declared dependency (the monorepo's hoisted node_modules would hide a missing one); every file
// the code locates with `new URL(..., import.meta.url)` is shipped; the packages depend on each
// other's exact versions, so that npm takes them from the tarballs rather than the registry.
import fs from 'node:fs';
import { builtinModules } from 'node:module';
import path from 'node:path';

const root = process.argv[2];
if (!root) throw new Error('usage: node check-tarballs.mjs <folder of unpacked packages>');

const problems = [];
const packages = fs.readdirSync(root).map((d) => {
  const dir = path.join(root, d);
  return { dir, json: JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) };
});
const versions = new Map(packages.map((p) => [p.json.name, p.json.version]));
const builtins = new Set(builtinModules);

function walk(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(path.join(dir, e.name)) : [path.join(dir, e.name)]));
}

function targets(value) {
  if (typeof value === 'string') return [value];
  if (value && typeof value === 'object') return Object.values(value).flatMap(targets);
  return [];
}

/** Module specifiers in a compiled file: import/export ... from, import '...', import(), require(). */
function specifiers(code) {
  const re = /^\s*(?:import|export)\s[^'";]*?from\s*['"]([^'"]+)['"]|^\s*import\s*['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)|\brequire(?:\.resolve)?\(\s*['"]([^'"]+)['"]\s*\)/gm;
  return [...code.matchAll(re)].map((m) => m[1] ?? m[2] ?? m[3] ?? m[4]);
}

function packageName(spec) {
  const parts = spec.split('/');
  return spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

for (const { dir, json } of packages) {
  const name = json.name;
  const say = (what) => problems.push(`${name}: ${what}`);
  const shipped = (rel, base = dir) => fs.existsSync(path.resolve(base, rel));

  if (json.private) say('is private');
  if (!json.license) say('has no licence');
  if (!json.engines?.node) say('says nothing about the Node version');
  for (const t of [json.main, json.types, ...targets(json.exports), ...targets(json.bin)]) {
    if (t !== undefined && !shipped(t)) say(`package.json names ${t}, which is not in the tarball`);
  }
  const deps = { ...json.dependencies, ...json.optionalDependencies, ...json.peerDependencies };
  for (const [dep, range] of Object.entries(deps)) {
    if (versions.has(dep) && range !== versions.get(dep)) say(`depends on ${dep}@${range}, not on the packed ${versions.get(dep)}`);
  }

  for (const file of walk(dir)) {
    const rel = path.relative(dir, file);
    if (/\.test\.|\.map$|tsbuildinfo/.test(rel)) say(`ships ${rel}`);
    if (!/\.(?:m|c)?js$/.test(rel)) continue;
    const code = fs.readFileSync(file, 'utf8');
    for (const spec of specifiers(code)) {
      if (spec.startsWith('.')) {
        if (!shipped(spec, path.dirname(file))) say(`${rel} imports ${spec}, which is not in the tarball`);
      } else if (!(spec.startsWith('node:') || builtins.has(spec))) {
        const dep = packageName(spec);
        if (dep !== name && !(dep in deps)) say(`${rel} imports ${spec}, but ${dep} is not a dependency`);
      }
    }
    // files found next to the code at run time: the literal part of the URL must exist
    for (const [, , literal, end] of code.matchAll(/new URL\(\s*([`'"])([^`'"]*?)(\$\{|\1)/g)) {
      const target = end === '${' ? literal.slice(0, literal.lastIndexOf('/') + 1) : literal;
      if (target && !shipped(target, path.dirname(file))) say(`${rel} reads ${target}, which is not in the tarball`);
    }
  }
}

if (problems.length) {
  console.error(problems.map((p) => `  ${p}`).join('\n'));
  process.exit(1);
}
console.log(`tarballs: ${packages.length} packages, entry points, imports and run-time files all present`);
