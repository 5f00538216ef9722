import { IdentifierTable, cppComment, cppIdentifier, cppStringLiteral, safeFileName } from './sanitize.js';

const HOSTILE = [
  'plain',
  'with space',
  'quote"inside',
  "single'quote",
  'back\\slash',
  'new\nline',
  'carriage\rreturn',
  'comment */ end',
  '/* open',
  '// line comment',
  'trigraph??=',
  'class',
  'int',
  'main',
  '__reserved',
  '_Capital',
  '9starts_with_digit',
  'ünïcödé',
  '名前',
  'emoji 😀',
  'nul\u0000byte',
  'tab\there',
  '#include <cstdlib>',
  '"); system("rm -rf /"); ("',
  '\\x41\\101',
  '',
  '-',
  '.hidden',
  '../../etc/passwd',
  'CON',
  'x'.repeat(10_000),
];

/** Decodes a C++ string literal written by cppStringLiteral (octal escapes only). */
function decodeLiteral(lit: string): Buffer {
  expect(lit.startsWith('"') && lit.endsWith('"')).toBe(true);
  const body = lit.slice(1, -1);
  const bytes: number[] = [];
  for (let i = 0; i < body.length; i++) {
    if (body[i] === '\\') {
      expect(body.slice(i + 1, i + 4)).toMatch(/^[0-7]{3}$/);
      bytes.push(parseInt(body.slice(i + 1, i + 4), 8));
      i += 3;
    } else bytes.push(body.charCodeAt(i));
  }
  return Buffer.from(bytes);
}

describe('sanitize', () => {
  test('identifiers are valid, not keywords, not reserved, short', () => {
    for (const name of HOSTILE) {
      const id = cppIdentifier(name);
      expect(id).toMatch(/^[A-Za-z][A-Za-z0-9_]*$/);
      expect(id).not.toMatch(/__/);
      expect(['class', 'int', 'main']).not.toContain(id);
      expect(id.length).toBeLessThanOrEqual(60);
    }
    expect(cppIdentifier('fc1_weight')).toBe('fc1_weight');
  });

  test('an identifier table gives distinct names distinct identifiers', () => {
    const t = new IdentifierTable(['d']);
    const ids = ['a.b', 'a_b', 'a b', 'a-b', 'd', ...HOSTILE].map((n) => t.get(n));
    expect(new Set(ids).size).toBe(ids.length - 0);
    expect(t.get('a.b')).toBe(ids[0]);
    expect(ids).not.toContain('d');
  });

  test('fresh identifiers differ even for a repeated name, and from those handed out by get', () => {
    const t = new IdentifierTable();
    expect(t.get('kConst_c')).toBe('kConst_c');
    expect(t.fresh('kConst_c')).toBe('kConst_c_2');
    expect(t.fresh('kConst_c')).toBe('kConst_c_3');
    expect(t.fresh('kConst_x')).toBe('kConst_x');
    expect(t.get('kConst_x')).toBe('kConst_x_2');
  });

  test('string literals hold the name (or a hashed prefix) and only safe characters', () => {
    for (const name of HOSTILE) {
      const lit = cppStringLiteral(name);
      expect(lit).toMatch(/^"[\x20-\x7e]*"$/);
      // unescaped characters never include quote, backslash-not-escape or '?'
      expect(lit.slice(1, -1).replace(/\\[0-7]{3}/g, '')).not.toMatch(/["\\?]/);
      const bytes = decodeLiteral(lit);
      const utf8 = Buffer.from(name, 'utf8');
      if (utf8.length <= 200) expect(bytes.equals(utf8)).toBe(true);
      else expect(bytes.subarray(0, 200).equals(utf8.subarray(0, 200))).toBe(true);
    }
  });

  test('comments are one line without delimiters or continuations', () => {
    for (const name of HOSTILE) {
      const c = cppComment(name);
      expect(c).toMatch(/^[\x20-\x7e]*$/);
      expect(c).not.toMatch(/\*\/|\/\*|\\/);
      expect(c.length).toBeLessThanOrEqual(123);
    }
  });

  test('file names stay in their folder', () => {
    const seen = new Set<string>();
    for (const name of HOSTILE) {
      const f = safeFileName(name);
      expect(f).toMatch(/^[A-Za-z0-9_][A-Za-z0-9._-]*$/);
      expect(f).not.toMatch(/^(con|prn|aux|nul)(\.|$)/i);
      expect(f.length).toBeLessThanOrEqual(70);
      seen.add(f);
    }
    expect(seen.size).toBe(HOSTILE.length);
  });
});
