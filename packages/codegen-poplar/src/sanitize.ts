/**
 * The one place where model-derived strings (tensor, parameter, graph and module names, op
 * titles, source file names) become parts of generated C++ or of file names. Everything the
 * generator writes from a model goes through one of these functions, so a hostile name (quotes,
 * backslashes, newlines, comment terminators, keywords, non-ASCII, very long) can neither break
 * the generated code nor change what it does.
 */

const CPP_KEYWORDS = new Set(
  (
    'alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t char32_t class compl concept ' +
    'const consteval constexpr constinit const_cast continue co_await co_return co_yield decltype default delete do double ' +
    'dynamic_cast else enum explicit export extern false float for friend goto if inline int long mutable namespace new ' +
    'noexcept not not_eq nullptr operator or or_eq private protected public register reinterpret_cast requires return short ' +
    'signed sizeof static static_assert static_cast struct switch template this thread_local throw true try typedef typeid ' +
    'typename union unsigned using virtual void volatile wchar_t while xor xor_eq final override import module ' +
    // names the generated code itself uses at file scope
    'main poplar popops poplin poputil gcl tg std half NULL INFINITY NAN'
  ).split(' '),
);

/** A short, stable hash of a string (FNV-1a, 32 bits), as 8 hex digits. */
export function shortHash(s: string): string {
  let h = 0x811c9dc5;
  for (const b of Buffer.from(s, 'utf8')) {
    h ^= b;
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0).toString(16).padStart(8, '0');
}

const MAX_IDENT = 40;

/**
 * A C++ identifier derived from `name`: ASCII letters, digits and single underscores only, never
 * a keyword, never reserved (no leading underscore, no "__"), at most about 50 characters. Names
 * that had to change get a hash of the original appended, so different names stay different.
 */
export function cppIdentifier(name: string, prefix = 'n'): string {
  let base = name.replace(/[^A-Za-z0-9_]/g, '_').replace(/_+/g, '_').replace(/^_+|_+$/g, '');
  const changed = base !== name || base.length > MAX_IDENT;
  if (base.length > MAX_IDENT) base = base.slice(0, MAX_IDENT).replace(/_+$/, '');
  let id = base === '' || /^[0-9]/.test(base) ? `${prefix}_${base}` : base;
  id = id.replace(/_+$/, '');
  if (changed) id = `${id}_${shortHash(name)}`;
  if (CPP_KEYWORDS.has(id)) id = `${id}_${shortHash(name)}`;
  return id;
}

/** Hands out distinct identifiers for distinct names within one scope. */
export class IdentifierTable {
  private readonly byName = new Map<string, string>();
  private readonly used = new Set<string>();
  constructor(reserved: Iterable<string> = []) {
    for (const r of reserved) this.used.add(r);
  }
  get(name: string, prefix = 'n'): string {
    const known = this.byName.get(name);
    if (known) return known;
    const base = cppIdentifier(name, prefix);
    let id = base;
    for (let i = 2; this.used.has(id); i++) id = `${base}_${i}`;
    this.used.add(id);
    this.byName.set(name, id);
    return id;
  }
  /** A new identifier for `name` even when the name was seen before (things that share a label). */
  fresh(name: string, prefix = 'n'): string {
    const base = cppIdentifier(name, prefix);
    let id = base;
    for (let i = 2; this.used.has(id); i++) id = `${base}_${i}`;
    this.used.add(id);
    return id;
  }
}

const MAX_LITERAL = 200;

/**
 * A C++ string literal (with its quotes) holding `s`, or a shortened form with a hash when it is
 * longer than `max` bytes. Only printable ASCII other than quote, backslash and '?' appears
 * unescaped; everything else is written as three-digit octal escapes, which cannot run into the
 * following characters.
 */
export function cppStringLiteral(s: string, max = MAX_LITERAL): string {
  let bytes = Buffer.from(s, 'utf8');
  if (bytes.length > max) {
    bytes = Buffer.concat([bytes.subarray(0, max), Buffer.from(`...#${shortHash(s)}`, 'ascii')]);
  }
  let out = '"';
  for (const b of bytes) {
    if (b >= 0x20 && b < 0x7f && b !== 0x22 && b !== 0x5c && b !== 0x3f) out += String.fromCharCode(b);
    else out += '\\' + b.toString(8).padStart(3, '0');
  }
  return out + '"';
}

/**
 * Text safe inside a `//` comment: one line of printable ASCII (other characters become '?'),
 * with no backslash at the end (which would continue the comment onto the next line) and no
 * comment delimiters, shortened to `max` characters.
 */
export function cppComment(s: string, max = 120): string {
  let t = s.replace(/[^\x20-\x7e]/g, '?').replace(/\\/g, '/').replace(/\/\*|\*\//g, '**');
  if (t.length > max) t = `${t.slice(0, max)}...`;
  return t;
}

const RESERVED_FILE_NAMES = /^(con|prn|aux|nul|com[0-9]|lpt[0-9])(\..*)?$/i;

/**
 * A file name (no directory part) derived from `name`: letters, digits, '.', '-' and '_' only,
 * never starting with '.' or '-', never a Windows device name, at most about 60 characters.
 */
export function safeFileName(name: string, fallback = 'model'): string {
  let base = name.replace(/[^A-Za-z0-9._-]/g, '_').replace(/^[.-]+/, '');
  const changed = base !== name;
  if (base.length > 48) base = base.slice(0, 48);
  if (base === '' || RESERVED_FILE_NAMES.test(base)) base = `${fallback}_${base}`;
  if (changed || name.length > 48) base = `${base}-${shortHash(name)}`;
  return base;
}
