import { Command, InvalidArgumentError } from 'commander';
import { CacheEntry, PruneResult, cacheMaxBytes, clearCache, listCache, parseByteSize, pruneCache } from '@tilegraph/runtime';
import { positiveNumber } from '../flags.js';
import { emitDocument } from '../json.js';
import { checkCacheFolderUpFront } from '../cachedir.js';

/**
 * `tilegraph cache ls | prune | clear`: the executable cache ($XDG_CACHE_HOME/tilegraph or
 * ~/.cache/tilegraph unless --dir), where builds and unpacked exported executables are kept.
 */

const DIR_FLAG = ['--dir <folder>', 'the cache folder (default: $XDG_CACHE_HOME/tilegraph, else ~/.cache/tilegraph)'] as const;
const JSON_FLAG = ['--json', 'print one JSON document'] as const;

function byteSize(v: string): number {
  const n = parseByteSize(v);
  if (n === undefined) throw new InvalidArgumentError(`expected a size in bytes, e.g. 1048576, 500M or 2G, got '${v}'`);
  return n;
}

export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let u = 0;
  let v = n;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${n} B` : `${v.toFixed(1)} ${units[u]}`;
}

function formatDate(d: Date): string {
  const p = (x: number) => String(x).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}`;
}

function clip(s: string, n: number): string {
  return s.length > n ? `${s.slice(0, n - 3)}...` : s;
}

function table(entries: readonly CacheEntry[]): string[] {
  const rows = [
    ['NAME', 'KIND', 'MODULE', 'SIZE', 'LAST USED', 'VALID'],
    ...entries.map((e) => [e.name, e.kind, clip(e.module ?? '-', 24), formatBytes(e.bytes), formatDate(e.lastUsed), e.valid ? 'yes' : `no: ${e.problem ?? 'unknown'}`]),
  ];
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  '));
}

function entryJson(e: CacheEntry): Record<string, unknown> {
  return { name: e.name, kind: e.kind, ...(e.module !== undefined ? { module: e.module } : {}), bytes: e.bytes, last_used: e.lastUsed.toISOString(), valid: e.valid, ...(e.problem !== undefined ? { problem: e.problem } : {}) };
}

function report(what: string, r: PruneResult, dir: string, json: boolean): void {
  if (json) {
    emitDocument({ command: what, dir, removed: r.removed.map(entryJson), freed_bytes: r.freedBytes, remaining_bytes: r.remainingBytes });
    return;
  }
  const lines = r.removed.map((e) => `removed ${e.name} (${e.kind}, ${formatBytes(e.bytes)})`);
  const n = r.removed.length;
  lines.push(n === 0 ? `${what}: nothing to remove; the cache holds ${formatBytes(r.remainingBytes)} (${dir})` : `${what}: removed ${n} ${n === 1 ? 'entry' : 'entries'}, freed ${formatBytes(r.freedBytes)}; the cache holds ${formatBytes(r.remainingBytes)} (${dir})`);
  process.stdout.write(lines.join('\n') + '\n');
}

export function registerCache(program: Command): void {
  const cache = program.command('cache').description('list, prune or clear the executable cache (builds and unpacked exported executables)');

  cache
    .command('ls')
    .alias('list')
    .description('list the cache entries, most recently used first, checking each against its manifest')
    .option(...DIR_FLAG)
    .option(...JSON_FLAG)
    .action((o: { dir?: string; json?: boolean }) => {
      const dir = checkCacheFolderUpFront(o.dir);
      const entries = listCache(dir);
      const total = entries.reduce((n, e) => n + e.bytes, 0);
      const invalid = entries.filter((e) => !e.valid && e.kind !== 'partial').length;
      if (o.json) {
        emitDocument({ dir, entries: entries.map(entryJson), total_bytes: total, max_bytes: cacheMaxBytes(), invalid });
        return;
      }
      const lines = [`cache: ${dir}`];
      if (entries.length) lines.push(...table(entries));
      lines.push(
        `${entries.length} ${entries.length === 1 ? 'entry' : 'entries'}, ${formatBytes(total)} (pruned beyond ${formatBytes(cacheMaxBytes())})` +
          (invalid ? `; ${invalid} invalid (rebuilt when next used; \`tilegraph cache prune\` removes them)` : ''),
      );
      process.stdout.write(lines.join('\n') + '\n');
    });

  cache
    .command('prune')
    .description('remove invalid entries and leftovers of interrupted builds, then the least recently used entries beyond --max-size or unused for --older-than days')
    .option(...DIR_FLAG)
    .option('--max-size <size>', 'keep at most this much: bytes, or with a K/M/G suffix (default: TILEGRAPH_CACHE_MAX_BYTES, else 2G)', byteSize)
    .option('--older-than <days>', 'remove entries not used for this many days', positiveNumber)
    .option(...JSON_FLAG)
    .action((o: { dir?: string; maxSize?: number; olderThan?: number; json?: boolean }) => {
      const dir = checkCacheFolderUpFront(o.dir);
      const r = pruneCache(dir, { maxBytes: o.maxSize ?? cacheMaxBytes(), ...(o.olderThan !== undefined ? { olderThanDays: o.olderThan } : {}) });
      report('prune', r, dir, !!o.json);
    });

  cache
    .command('clear')
    .description('remove every cache entry (other files in the folder are left alone)')
    .option(...DIR_FLAG)
    .option(...JSON_FLAG)
    .action((o: { dir?: string; json?: boolean }) => {
      const dir = checkCacheFolderUpFront(o.dir);
      report('clear', clearCache(dir), dir, !!o.json);
    });
}
