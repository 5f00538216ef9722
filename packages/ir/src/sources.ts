/**
 * The source texts a compilation opened — the model file, its imports, a text IR file, the options
 * file — by the names their locations use. Diagnostics quote lines only from these: a location can
 * name any path (a `.tgir` file's `loc("/some/file":N:1)`), and rendering it must never make
 * tilegraph read a file the compilation did not open. The loaders fill it as they read; the
 * command-line reporter consults it and never reads the file system itself.
 */

const opened = new Map<string, string>();

/** The names a file may be looked up by: as written, and made absolute against the working folder. */
function keys(file: string): string[] {
  const out = [file];
  // absolute without node:path (this package also runs in browsers): POSIX paths only
  const cwd = typeof process !== 'undefined' && typeof process.cwd === 'function' ? process.cwd() : undefined;
  if (cwd !== undefined && !file.startsWith('/') && !/^[A-Za-z]:[\\/]/.test(file) && !file.startsWith('<') && !file.startsWith('std/')) out.push(normalize(`${cwd}/${file}`));
  return out;
}

function normalize(p: string): string {
  const parts: string[] = [];
  for (const seg of p.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..') parts.pop();
    else parts.push(seg);
  }
  return '/' + parts.join('/');
}

/** Records that the compilation opened `file` and read `text` from it. */
export function noteOpenedSource(file: string, text: string): void {
  for (const k of keys(file)) opened.set(k, text);
}

/** The text of `file` when the compilation opened it, else undefined (never read here). */
export function openedSource(file: string): string | undefined {
  for (const k of keys(file)) {
    const t = opened.get(k);
    if (t !== undefined) return t;
  }
  return undefined;
}

/** Forgets every opened source (tests; a long-lived process compiling many models). */
export function clearOpenedSources(): void {
  opened.clear();
}
