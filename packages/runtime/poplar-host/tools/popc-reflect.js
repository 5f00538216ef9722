#!/usr/bin/env node
// popc-reflect: the poplar-host emulation's stand-in for popc.
//
//   node popc-reflect.js codelets.cpp [more.cpp ...] -o codelets_registry.cpp
//
// popc compiles vertex classes for the IPU and records, for each one, its
// name and fields. The emulation compiles the codelets with g++ instead, so
// this tool reads the vertex class declarations and writes a C++ file that
// registers every vertex by the name the host uses ("ns::Name",
// "ns::Name<float,true>") with a factory and a binding for each field. The
// registry file includes the codelets source inside an anonymous namespace,
// so the classes are visible to it without clashing with the separately
// compiled codelets.cpp; it re-emits the codelets' own #include lines first
// so that headers are not expanded inside that namespace. The C++ types of
// the fields (Input/Output/InOut of scalars or Vector<T>, Vector<Input<
// Vector<T>>>, VectorList, plain scalar or Vector members set with
// setInitialValue) are worked out by templates in poplar_host/VertexRegistry.hpp;
// this tool only needs member names.
//
// What it understands:
//  - namespaces (nested, `a::b`, inline, anonymous), extern "C" blocks;
//  - classes and structs deriving (publicly or not) from poplar::Vertex,
//    MultiVertex or SupervisorVertex, written with or without `poplar::`,
//    or from another class of the same file that derives from one (its
//    fields are inherited); a class is registered when it or such a base
//    declares compute();
//  - class templates, registered for each explicit instantiation
//    (`template class ns::Name<float>;`, also inside namespaces); trailing
//    default template arguments give a second, fully spelt name;
//  - public data members, several per declaration (`Input<float> a, b;`),
//    const members, default member initialisers; member functions, nested
//    types, static members, using/typedef/friend/static_assert and macro
//    statements such as IS_EXTERNAL_CODELET(true); are skipped; so are
//    bit-fields, references and private/protected members;
//  - comments, string literals, line continuations, attributes ([[...]],
//    alignas(...), __attribute__((...))) and odd whitespace; `#if 0`
//    blocks are dropped.
// Limits: other preprocessor conditionals are ignored (both branches are
// read) and macros are not expanded; a template vertex without an explicit
// instantiation is not registered (as with popc, which needs one); partial
// specialisations are not supported; a vertex class must be default
// constructible or declare its default constructor (a declared but
// undefined one, as popc code may write, makes the emulation zero-fill the
// object instead of constructing it).
// A vertex class that cannot be parsed stops the tool with a message naming
// the class and line, and exit status 1.

import { readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { dirname, relative, resolve, isAbsolute } from 'node:path';
import { fileURLToPath } from 'node:url';

/** A codelets file this tool cannot read; its message names the file and line. */
export class ReflectError extends Error {}

// --- lexing ---------------------------------------------------------------------

/** Removes comments and #if 0 blocks, keeps line numbers, collects includes. */
function preprocess(text, file) {
  // Line continuations first (they may join preprocessor lines and comments).
  const joined = text.replace(/\\\r?\n/g, ' ');
  let out = '';
  let i = 0;
  const n = joined.length;
  while (i < n) {
    const c = joined[i];
    const d = joined[i + 1];
    if (c === '/' && d === '/') {
      while (i < n && joined[i] !== '\n') i++;
    } else if (c === '/' && d === '*') {
      const end = joined.indexOf('*/', i + 2);
      if (end < 0) throw new ReflectError(`${file}: unterminated /* comment`);
      out += joined.slice(i, end + 2).replace(/[^\n]/g, ' ');
      i = end + 2;
    } else if (c === '"' || c === "'") {
      // Raw strings are rare in codelets; ordinary literals are copied whole.
      let j = i + 1;
      while (j < n && joined[j] !== c) {
        if (joined[j] === '\\') j++;
        if (joined[j] === '\n') break;
        j++;
      }
      out += joined.slice(i, j + 1);
      i = j + 1;
    } else {
      out += c;
      i++;
    }
  }
  const lines = out.split('\n');
  const includes = [];
  const kept = [];
  // Open conditionals: #if 0 / #if 1 are followed; other conditions are
  // unknown and both of their branches are kept.
  const conditionals = [];
  const dropping = () => conditionals.some((f) => f.dropping);
  for (const line of lines) {
    const m = /^\s*#\s*(\w+)(.*)$/.exec(line);
    if (!m) {
      kept.push(dropping() ? '' : line);
      continue;
    }
    const [, directive, rest] = m;
    if (directive === 'if' || directive === 'ifdef' || directive === 'ifndef') {
      const state = directive !== 'if' ? 'unknown' : /^\s*0\s*$/.test(rest) ? 'zero' : /^\s*1\s*$/.test(rest) ? 'one' : 'unknown';
      conditionals.push({ state, dropping: state === 'zero' });
    } else if (directive === 'else' || directive === 'elif') {
      const top = conditionals[conditionals.length - 1];
      if (top && top.state === 'zero') top.dropping = false;
      else if (top && top.state === 'one') top.dropping = true;
    } else if (directive === 'endif') {
      conditionals.pop();
    } else if (directive === 'include' && conditionals.length === 0) {
      const inc = /^\s*([<"])([^>"]+)[>"]/.exec(rest);
      if (inc) includes.push({ quoted: inc[1] === '"', path: inc[2] });
    }
    kept.push('');
  }
  return { text: kept.join('\n'), includes };
}

const PUNCT2 = new Set(['::', '->', '&&', '||', '==', '!=', '<=', '>=', '+=', '-=', '*=', '/=', '++', '--']);

function tokenize(text) {
  const toks = [];
  let line = 1;
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text[i];
    if (c === '\n') {
      line++;
      i++;
    } else if (/\s/.test(c)) {
      i++;
    } else if (/[A-Za-z_$]/.test(c)) {
      let j = i + 1;
      while (j < n && /[\w$]/.test(text[j])) j++;
      toks.push({ t: text.slice(i, j), line, kind: 'id' });
      i = j;
    } else if (/[0-9]/.test(c) || (c === '.' && /[0-9]/.test(text[i + 1]))) {
      let j = i + 1;
      while (j < n && /[\w.']/.test(text[j])) j++;
      toks.push({ t: text.slice(i, j), line, kind: 'num' });
      i = j;
    } else if (c === '"' || c === "'") {
      let j = i + 1;
      while (j < n && text[j] !== c) j += text[j] === '\\' ? 2 : 1;
      toks.push({ t: text.slice(i, j + 1), line, kind: 'str' });
      i = j + 1;
    } else {
      const two = text.slice(i, i + 2);
      // '>' stays single so that `Vector<Input<Vector<T>>>` closes three lists.
      if (PUNCT2.has(two)) {
        toks.push({ t: two, line, kind: 'p' });
        i += 2;
      } else {
        toks.push({ t: c, line, kind: 'p' });
        i++;
      }
    }
  }
  return stripAttributes(toks);
}

/** Drops [[...]], alignas(...), __attribute__((...)) and __declspec(...). */
function stripAttributes(toks) {
  const out = [];
  for (let i = 0; i < toks.length; i++) {
    const t = toks[i].t;
    if (t === '[' && toks[i + 1]?.t === '[') {
      i = matching(toks, i); // [[attribute]]
      continue;
    }
    if ((t === 'alignas' || t === '__attribute__' || t === '__declspec') && toks[i + 1]?.t === '(') {
      i = matching(toks, i + 1);
      continue;
    }
    out.push(toks[i]);
  }
  return out;
}

const OPEN = { '(': ')', '[': ']', '{': '}' };

/** Index of the bracket closing the one at i. */
function matching(toks, i) {
  const open = toks[i].t;
  const close = OPEN[open];
  let depth = 0;
  for (let j = i; j < toks.length; j++) {
    if (toks[j].t === open) depth++;
    else if (toks[j].t === close && --depth === 0) return j;
  }
  throw new ReflectError(`line ${toks[i].line}: unbalanced '${open}'`);
}

/** Index of the '>' closing the '<' at i (parentheses may nest inside). */
function matchingAngle(toks, i) {
  let depth = 0;
  for (let j = i; j < toks.length; j++) {
    const t = toks[j].t;
    if (t === '(' || t === '[' || t === '{') j = matching(toks, j);
    else if (t === '<') depth++;
    else if (t === '>' && --depth === 0) return j;
    else if (t === ';') break;
  }
  throw new ReflectError(`line ${toks[i].line}: unbalanced '<'`);
}

/** Joins tokens as C++ would print them: a blank only between words. */
function spell(toks) {
  let s = '';
  for (const tok of toks) {
    if (s && /[\w$]$/.test(s) && /^[\w$]/.test(tok.t)) s += ' ';
    s += tok.t;
  }
  return s;
}

/** Splits [a, b) at commas outside any brackets. */
function splitTopLevel(toks, a, b) {
  const parts = [];
  let start = a;
  let angle = 0;
  for (let j = a; j < b; j++) {
    const t = toks[j].t;
    if (OPEN[t]) j = matching(toks, j);
    else if (t === '<') angle++;
    else if (t === '>') angle = Math.max(0, angle - 1);
    else if (t === ',' && angle === 0) {
      parts.push([start, j]);
      start = j + 1;
    }
  }
  parts.push([start, b]);
  return parts;
}

// --- parsing --------------------------------------------------------------------

const VERTEX_BASES = new Set(['Vertex', 'MultiVertex', 'SupervisorVertex']);

class Parser {
  constructor(toks, file) {
    this.toks = toks;
    this.file = file;
    this.classes = []; // {name, ns, params, bases, members, noConstruct, hasCompute, line, isStruct}
    this.instantiations = []; // {ns, qual, args, line}: `template class qual<args>;` inside ns
  }

  fail(i, msg) {
    const line = this.toks[Math.min(i, this.toks.length - 1)]?.line ?? 0;
    throw new ReflectError(`${this.file}:${line}: ${msg}`);
  }

  parseScope(i, end, ns) {
    const T = this.toks;
    while (i < end) {
      const t = T[i].t;
      if (t === ';') {
        i++;
      } else if (t === 'namespace' || (t === 'inline' && T[i + 1]?.t === 'namespace')) {
        if (t === 'inline') i++;
        i++;
        const names = [];
        while (T[i] && T[i].kind === 'id') {
          names.push(T[i].t);
          i++;
          if (T[i]?.t === '::') i++;
          else break;
        }
        if (T[i]?.t === '=') {
          i = this.skipTo(i, ';') + 1; // namespace alias
          continue;
        }
        if (T[i]?.t !== '{') this.fail(i, 'expected { after namespace');
        const close = this.matchingOrExplain(i, [...ns, ...names]);
        this.parseScope(i + 1, close, [...ns, ...names]); // anonymous namespaces add no name
        i = close + 1;
      } else if (t === 'extern' && T[i + 1]?.kind === 'str') {
        if (T[i + 2]?.t === '{') {
          const close = matching(T, i + 2);
          this.parseScope(i + 3, close, ns);
          i = close + 1;
        } else i = this.skipDeclaration(i + 2);
      } else if (t === 'extern' && T[i + 1]?.t === 'template') {
        i = this.skipTo(i, ';') + 1; // an instantiation declaration defines nothing
      } else if (t === 'template') {
        i = this.parseTemplate(i, ns);
      } else if ((t === 'class' || t === 'struct') && T[i + 1]?.kind === 'id') {
        i = this.parseClass(i, ns, null);
      } else if (t === 'using' || t === 'typedef' || t === 'static_assert') {
        i = this.skipTo(i, ';') + 1;
      } else {
        i = this.skipDeclaration(i);
      }
    }
  }

  /** matching(), but an unclosed namespace is blamed on the class left open inside it. */
  matchingOrExplain(i, ns) {
    const T = this.toks;
    try {
      return matching(T, i);
    } catch (e) {
      if (!(e instanceof ReflectError)) throw e;
      for (let k = i + 1; k < T.length; k++) {
        if ((T[k].t !== 'class' && T[k].t !== 'struct') || T[k + 1]?.kind !== 'id') continue;
        let b = k + 2;
        while (b < T.length && T[b].t !== '{' && T[b].t !== ';') b++;
        if (T[b]?.t !== '{') continue;
        try {
          matching(T, b);
        } catch {
          throw new ReflectError(`cannot parse class '${[...ns, T[k + 1].t].join('::')}': ${this.file}:${T[k].line}: its body is not closed`);
        }
      }
      throw new ReflectError(`${this.file}: ${e.message}`);
    }
  }

  skipTo(i, what) {
    const T = this.toks;
    for (let j = i; j < T.length; j++) {
      if (T[j].t === what) return j;
      if (OPEN[T[j].t]) j = matching(T, j);
    }
    this.fail(i, `expected '${what}'`);
  }

  /** Skips a declaration or definition that is not a class. */
  skipDeclaration(i) {
    const T = this.toks;
    let sawParen = false;
    for (let j = i; j < T.length; j++) {
      const t = T[j].t;
      if (t === ';') return j + 1;
      if (t === '(') {
        sawParen = true;
        j = matching(T, j);
      } else if (t === '[') j = matching(T, j);
      else if (t === '{') {
        const close = matching(T, j);
        const before = T[j - 1]?.t;
        // A function body ends the declaration; an initialiser does not.
        if (sawParen && before !== '=' && before !== ',' && !(T[j - 1]?.kind === 'id' && this.inInitList(i, j)))
          return T[close + 1]?.t === ';' ? close + 2 : close + 1;
        if (!sawParen && before !== '=' && T[close + 1]?.t === ';') return close + 2; // enum/union body
        j = close;
      }
    }
    return T.length;
  }

  /** Whether '{' at j follows `name` in a constructor's member-initialiser list. */
  inInitList(start, j) {
    const T = this.toks;
    let depth = 0;
    for (let k = start; k < j; k++) {
      const t = T[k].t;
      if (t === '(') depth++;
      else if (t === ')') depth--;
      else if (t === ':' && depth === 0 && T[k - 1]?.t === ')') return true;
    }
    return false;
  }

  parseTemplateParams(lt) {
    const T = this.toks;
    const gt = matchingAngle(T, lt);
    const params = splitTopLevel(T, lt + 1, gt).filter(([a, b]) => b > a).map(([a, b]) => {
      let eq = -1;
      for (let j = a; j < b; j++) if (T[j].t === '=') { eq = j; break; }
      const declEnd = eq >= 0 ? eq : b;
      let name = null;
      for (let j = declEnd - 1; j >= a; j--) if (T[j].kind === 'id') { name = T[j].t; break; }
      return { name, defaultText: eq >= 0 ? spell(T.slice(eq + 1, b)) : null };
    });
    return { params, end: gt + 1 };
  }

  parseTemplate(i, ns) {
    const T = this.toks;
    if (T[i + 1]?.t === '<') {
      const { params, end } = this.parseTemplateParams(i + 1);
      if ((T[end]?.t === 'class' || T[end]?.t === 'struct') && T[end + 1]?.kind === 'id') {
        return this.parseClass(end, ns, params);
      }
      return this.skipDeclaration(end);
    }
    if (T[i + 1]?.t === 'class' || T[i + 1]?.t === 'struct') {
      // Explicit instantiation: template class a::b::Name<args>;
      let j = i + 2;
      const nameToks = [];
      while (T[j] && (T[j].kind === 'id' || T[j].t === '::')) nameToks.push(T[j++]);
      if (T[j]?.t !== '<') this.fail(j, 'expected template arguments in an explicit instantiation');
      const gt = matchingAngle(T, j);
      const args = splitTopLevel(T, j + 1, gt).map(([a, b]) => spell(T.slice(a, b)));
      if (T[gt + 1]?.t !== ';') this.fail(gt + 1, "expected ';' after an explicit instantiation");
      this.instantiations.push({ ns, qual: nameToks.map((x) => x.t).join(''), args, line: T[i].line });
      return gt + 2;
    }
    return this.skipDeclaration(i + 1);
  }

  parseClass(i, ns, params) {
    const name = this.toks[i + 1].t;
    try {
      return this.parseClassAt(i, ns, params);
    } catch (e) {
      if (e instanceof ReflectError && !e.message.includes('cannot parse class'))
        throw new ReflectError(`cannot parse class '${[...ns, name].join('::')}': ${e.message}`);
      throw e;
    }
  }

  parseClassAt(i, ns, params) {
    const T = this.toks;
    const isStruct = T[i].t === 'struct';
    const name = T[i + 1].t;
    const line = T[i].line;
    let j = i + 2;
    if (T[j]?.t === '<') {
      // A partial or explicit specialisation: not supported; skip it.
      j = matchingAngle(T, j) + 1;
      return this.skipClassLike(j);
    }
    if (T[j]?.t === 'final') j++;
    if (T[j]?.t === ';') return j + 1; // forward declaration
    const bases = [];
    if (T[j]?.t === ':') {
      const lb = this.findClassBrace(j, name);
      for (const [a, b] of splitTopLevel(T, j + 1, lb)) {
        const parts = T.slice(a, b).filter((x) => !['public', 'protected', 'private', 'virtual'].includes(x.t));
        const lt = parts.findIndex((x) => x.t === '<');
        const nameParts = (lt >= 0 ? parts.slice(0, lt) : parts).map((x) => x.t).join('');
        bases.push(nameParts.replace(/^::/, ''));
      }
      j = lb;
    }
    if (T[j]?.t !== '{') {
      // Not a class definition (e.g. `struct X *p;`): skip the declaration.
      return this.skipDeclaration(i);
    }
    const close = matching(T, j);
    const cls = { name, ns, params, bases, members: [], noConstruct: false, hasCompute: false, line, isStruct };
    this.parseBody(j + 1, close, cls);
    this.classes.push(cls);
    // Declarators after the body (`} v;`) are not vertices; skip to ';'.
    return this.skipTo(close + 1, ';') + 1;
  }

  findClassBrace(j, name) {
    const T = this.toks;
    for (let k = j; k < T.length; k++) {
      if (T[k].t === '{') return k;
      if (T[k].t === ';') this.fail(k, `expected the body of class '${name}'`);
      if (T[k].t === '<') k = matchingAngle(T, k);
      else if (T[k].t === '(') k = matching(T, k);
    }
    this.fail(j, `expected the body of class '${name}'`);
  }

  skipClassLike(j) {
    const T = this.toks;
    for (let k = j; k < T.length; k++) {
      if (T[k].t === ';') return k + 1;
      if (T[k].t === '{') return this.skipTo(matching(T, k) + 1, ';') + 1;
      if (T[k].t === '(') k = matching(T, k);
    }
    return T.length;
  }

  parseBody(i, end, cls) {
    const T = this.toks;
    let access = cls.isStruct ? 'public' : 'private';
    while (i < end) {
      const t = T[i].t;
      if (t === ';') {
        i++;
      } else if ((t === 'public' || t === 'private' || t === 'protected') && T[i + 1]?.t === ':') {
        access = t;
        i += 2;
      } else if (t === 'template') {
        i = T[i + 1]?.t === '<' ? this.parseTemplateParams(i + 1).end : i + 1;
        i = this.skipMember(i, end);
      } else if (['using', 'typedef', 'friend', 'static_assert'].includes(t)) {
        i = this.skipTo(i, ';') + 1;
      } else if (['class', 'struct', 'union', 'enum'].includes(t)) {
        i = this.skipMember(i, end);
      } else {
        const next = this.parseMember(i, end, cls, access);
        if (next <= i) this.fail(i, 'could not read a member declaration');
        i = next;
      }
    }
  }

  /** Skips one member (function, nested type, template...); returns the index after it. */
  skipMember(i, end) {
    return Math.min(this.skipDeclaration(i), end);
  }

  parseMember(i, end, cls, access) {
    const T = this.toks;
    // Find the end of the statement and whether it declares a function:
    // a '(' outside template brackets before any '=' or '{' initialiser.
    let angle = 0;
    let funcLike = false;
    let seenInit = false;
    let stmtEnd = -1;
    let next = -1;
    for (let j = i; j < end; j++) {
      const t = T[j].t;
      if (t === ';') {
        stmtEnd = j;
        next = j + 1;
        break;
      }
      if (t === '<' && !seenInit && !funcLike) angle++;
      else if (t === '>' && !seenInit && !funcLike) angle = Math.max(0, angle - 1);
      else if (t === '=' && angle === 0 && !funcLike) seenInit = true;
      else if (t === '(') {
        if (angle === 0 && !seenInit) funcLike = true;
        j = matching(T, j);
      } else if (t === '[') j = matching(T, j);
      else if (t === '{') {
        const close = matching(T, j);
        if (funcLike && !(T[j - 1]?.kind === 'id' && this.inInitList(i, j))) {
          stmtEnd = j;
          next = T[close + 1]?.t === ';' ? close + 2 : close + 1;
          break;
        }
        if (angle === 0) seenInit = true;
        j = close;
      }
    }
    if (stmtEnd < 0) this.fail(i, "expected ';' after a member declaration");
    const stmt = T.slice(i, stmtEnd);
    if (funcLike) {
      const paren = stmt.findIndex((x) => x.t === '(');
      if (paren > 0 && stmt[paren - 1].t === 'compute') cls.hasCompute = true;
      // A constructor declared but not defined: the object cannot be built.
      const ctor = stmt[0]?.t === cls.name || (stmt[0]?.t === 'explicit' && stmt[1]?.t === cls.name);
      const head = stmt[0]?.t === 'explicit' ? 1 : 0;
      const emptyParams = stmt[head + 1]?.t === '(' && stmt[head + 2]?.t === ')';
      const definedElsewhere = T[stmtEnd]?.t === ';' && !stmt.some((x) => x.t === 'default');
      if (ctor && emptyParams && definedElsewhere) cls.noConstruct = true;
      return next;
    }
    if (stmt.some((x) => x.t === 'static' || x.t === 'constexpr' || x.t === 'typedef')) return next;
    if (access !== 'public') return next;
    for (const [a, b] of splitTopLevel(T, i, stmtEnd)) {
      let declEnd = b;
      let angleDepth = 0;
      let bitField = false;
      for (let j = a; j < b; j++) {
        const t = T[j].t;
        if (t === '<') angleDepth++;
        else if (t === '>') angleDepth = Math.max(0, angleDepth - 1);
        else if (angleDepth === 0 && (t === '=' || t === '{' || t === '[' || t === ':')) {
          if (t === ':') bitField = true;
          declEnd = j;
          break;
        }
      }
      if (bitField) continue;
      let k = declEnd - 1;
      if (k < a || T[k].kind !== 'id') continue;
      if (T[k - 1]?.t === '&' || T[k - 1]?.t === '&&') continue; // reference member
      cls.members.push(T[k].t);
    }
    return next;
  }
}

// --- resolution and output --------------------------------------------------------

function qualified(cls) {
  return [...cls.ns, cls.name].join('::');
}

/** Finds the class a name refers to from namespace `ns` (innermost first). */
function lookupClass(classes, ns, name) {
  const clean = name.replace(/^::/, '');
  for (let k = ns.length; k >= 0; k--) {
    const full = [...ns.slice(0, k), clean].join('::');
    const hit = classes.find((c) => qualified(c) === full);
    if (hit) return hit;
  }
  return null;
}

function isVertexBase(name) {
  const clean = name.replace(/^::/, '');
  const short = clean.replace(/^poplar::/, '');
  return VERTEX_BASES.has(short) && (clean === short || clean === `poplar::${short}`);
}

function vertexKind(classes, cls, seen = new Set()) {
  if (seen.has(cls)) return null;
  seen.add(cls);
  for (const b of cls.bases) {
    if (isVertexBase(b)) return b.replace(/^(::)?poplar::/, '');
    const base = lookupClass(classes, cls.ns, b);
    if (base) {
      const k = vertexKind(classes, base, seen);
      if (k) return k;
    }
  }
  return null;
}

/** Whether the class or a base defined in the file declares compute(). */
function hasCompute(classes, cls, seen = new Set()) {
  if (seen.has(cls)) return false;
  seen.add(cls);
  if (cls.hasCompute) return true;
  return cls.bases.some((b) => {
    const base = lookupClass(classes, cls.ns, b);
    return base ? hasCompute(classes, base, seen) : false;
  });
}

/** Member names of a class and of its bases defined in the file (bases first). */
function allMembers(classes, cls, seen = new Set()) {
  if (seen.has(cls)) return [];
  seen.add(cls);
  const out = [];
  for (const b of cls.bases) {
    const base = lookupClass(classes, cls.ns, b);
    if (base) out.push(...allMembers(classes, base, seen));
  }
  for (const m of cls.members) if (!out.includes(m)) out.push(m);
  return out;
}

function cppString(s) {
  return JSON.stringify(s);
}

/**
 * Writes the registry for the codelets files `inputs` to `outFile` and returns what it registered.
 * Warnings (a template vertex without an instantiation) go to `warn`; a file it cannot read throws
 * a ReflectError. The build driver calls it in its own process, which saves starting one.
 */
export function generate(inputs, outFile, warn = (msg) => process.stderr.write(`popc-reflect: warning: ${msg}\n`)) {
  const outDir = dirname(resolve(outFile));
  const includes = [];
  const registrations = []; // {ns, cppType, names, members, noConstruct}
  const sources = [];
  for (const file of inputs) {
    const text = readFileSync(file, 'utf8');
    const pre = preprocess(text, file);
    for (const inc of pre.includes) {
      const spelt = inc.quoted
        ? `"${relative(outDir, resolve(dirname(resolve(file)), inc.path)).split('\\').join('/')}"`
        : `<${inc.path}>`;
      if (!includes.includes(spelt)) includes.push(spelt);
    }
    const parser = new Parser(tokenize(pre.text), file);
    try {
      parser.parseScope(0, parser.toks.length, []);
    } catch (e) {
      // Helpers report `line N`; name the file too.
      if (e instanceof ReflectError) e.message = e.message.replace(/(^|: )line (\d+): /, `$1${file}:$2: `);
      throw e;
    }
    const { classes, instantiations } = parser;
    for (const cls of classes) {
      const kind = vertexKind(classes, cls);
      if (!kind || !hasCompute(classes, cls)) continue; // field-only base classes are not vertices
      const members = allMembers(classes, cls);
      if (!cls.params) {
        registrations.push({ ns: cls.ns, cppType: cls.name, names: [qualified(cls)], members, noConstruct: cls.noConstruct, cls });
        continue;
      }
      const insts = instantiations.filter((inst) => lookupClass(classes, inst.ns, inst.qual) === cls);
      if (insts.length === 0) {
        warn(`${file}:${cls.line}: template vertex '${qualified(cls)}' has no explicit instantiation; it is not registered`);
      }
      for (const inst of insts) {
        const names = [`${qualified(cls)}<${inst.args.join(',')}>`];
        if (inst.args.length < cls.params.length && cls.params.slice(inst.args.length).every((p) => p.defaultText !== null)) {
          const full = [...inst.args, ...cls.params.slice(inst.args.length).map((p) => p.defaultText)];
          names.push(`${qualified(cls)}<${full.join(',')}>`);
        }
        registrations.push({ ns: inst.ns, cppType: `${inst.qual}<${inst.args.join(', ')}>`, names, members, noConstruct: cls.noConstruct, cls });
      }
    }
    const rel = relative(outDir, resolve(file)).split('\\').join('/');
    sources.push(isAbsolute(rel) ? resolve(file) : rel);
  }

  const lines = [];
  lines.push('// Generated by poplar-host/tools/popc-reflect.js from ' + inputs.map((f) => f.split('/').pop()).join(', ') + '; do not edit.');
  lines.push('// Registers the vertex classes of the codelets with the poplar-host engine.');
  lines.push('//');
  for (const r of registrations) lines.push(`//   ${r.names.join('  =  ')}: ${r.members.join(', ') || '(no fields)'}`);
  lines.push('#include <poplar/Vertex.hpp>');
  lines.push('#include <poplar_host/VertexRegistry.hpp>');
  lines.push('#include <cstddef>');
  for (const inc of includes)
    if (inc !== '<poplar/Vertex.hpp>' && inc !== '<cstddef>') lines.push(`#include ${inc}`);
  lines.push('');
  lines.push('// a field inherited from a base vertex class makes the class not standard-layout, where');
  lines.push('// offsetof is conditionally supported: GCC and Clang support it for classes without virtual bases');
  lines.push('#pragma GCC diagnostic ignored "-Winvalid-offsetof"');
  lines.push('');
  lines.push('namespace {');
  for (const src of sources) lines.push(`#include ${cppString(src)}`);
  lines.push('} // namespace');
  lines.push('');
  lines.push('namespace {');
  registrations.forEach((r, k) => {
    for (const part of r.ns) lines.push(`namespace ${part} {`);
    // the fields as a table of constants (code per field would take a good part of the build)
    lines.push(`void poplarHostRegister${k}() {`);
    lines.push(`  using RegisteredVertex = ${r.cppType};`);
    if (r.members.length > 0) {
      lines.push('  static constexpr poplar_host::FieldSpec kFields[] = {');
      for (const m of r.members) lines.push(`      poplar_host::fieldSpec<decltype(RegisteredVertex::${m})>(${cppString(m)}, offsetof(RegisteredVertex, ${m})),`);
      lines.push('  };');
    }
    for (const name of r.names) {
      lines.push(`  poplar_host::VertexType<RegisteredVertex${r.noConstruct ? ', false' : ''}>(${cppString(name)})`);
      lines.push(`      .fields(${r.members.length > 0 ? 'kFields' : 'nullptr'}, ${r.members.length})`);
      lines.push('      .add();');
    }
    lines.push('}');
    for (let p = r.ns.length - 1; p >= 0; p--) lines.push(`} // namespace ${r.ns[p]}`);
  });
  lines.push('const bool poplarHostRegistered = [] {');
  for (const file of inputs) lines.push(`  poplar_host::registerCodeletsFile(${cppString(file.split('/').pop())});`);
  registrations.forEach((r, k) => lines.push(`  ${[...r.ns, `poplarHostRegister${k}`].join('::')}();`));
  lines.push('  return true;');
  lines.push('}();');
  lines.push('} // namespace');
  lines.push('');
  writeFileSync(outFile, lines.join('\n'));
  return registrations;
}

function main(argv) {
  const inputs = [];
  let out = null;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '-o') out = argv[++i];
    else if (argv[i] === '-h' || argv[i] === '--help') {
      process.stdout.write('usage: popc-reflect.js codelets.cpp [more.cpp ...] -o codelets_registry.cpp\n');
      return 0;
    } else if (argv[i].startsWith('-')) {
      // popc options (-O3, --target ipu2, -I, -D) do not matter here.
      if (['--target', '-I', '-D'].includes(argv[i])) i++;
    } else inputs.push(argv[i]);
  }
  if (inputs.length === 0 || !out) {
    process.stderr.write('usage: popc-reflect.js codelets.cpp [more.cpp ...] -o codelets_registry.cpp\n');
    return 2;
  }
  try {
    generate(inputs, out); // a file without vertices is fine: its registry is empty
    return 0;
  } catch (e) {
    if (e instanceof ReflectError || e.code === 'ENOENT') {
      process.stderr.write(`popc-reflect: error: ${e.message}\n`);
      return 1;
    }
    throw e;
  }
}

// a command when run as one; a module when imported
const isEntry = () => {
  try {
    return process.argv[1] !== undefined && realpathSync(process.argv[1]) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
};
if (isEntry()) process.exitCode = main(process.argv.slice(2));
