import fs from 'node:fs';

/**
 * The device side: vertex classes collected while lowering, de-duplicated by their text, and
 * written as codelets.cpp (plain Poplar codelet C++, built by popc or by the emulation).
 */

/**
 * Fixed device code, kept in real C++ files (packages/codegen-poplar/cpp) and copied into every
 * codelets.cpp, so that a generated file builds on its own with popc.
 */
export function cppFile(name: string): string {
  return fs.readFileSync(new URL(`../cpp/${name}`, import.meta.url), 'utf8');
}

const FIXED_VERTICES = cppFile('fixed_vertices.cpp');

/**
 * The text of a class of cpp/fixed_vertices.cpp under a new name: for CodeletSet.add, which
 * names each class it writes.
 */
export function fixedVertex(className: string): (name: string) => string {
  const start = FIXED_VERTICES.indexOf(`// vertex: ${className}\n`);
  const end = start < 0 ? -1 : FIXED_VERTICES.indexOf('\n};\n', start);
  if (end < 0) throw new Error(`internal: cpp/fixed_vertices.cpp has no vertex ${className}`);
  const text = FIXED_VERTICES.slice(start, end + 3)
    .split('\n')
    .filter((l) => !l.startsWith('//'))
    .join('\n');
  return (name) => text.replace(new RegExp(`\\bclass ${className}\\b`), `class ${name}`);
}

/** Scalar maths with the reference interpreter's semantics, and MultiVertex work splitting. */
const PRELUDE = cppFile('codelet_prelude.hpp');
/** The reference's counter-based random number generator, for modules that draw random numbers. */
const RANDOM_PRELUDE = cppFile('codelet_random.hpp');

export interface CodeletClass {
  /** Class name inside namespace tg. */
  readonly name: string;
  /** Template parameter list ("typename T") or undefined. */
  readonly template?: string;
  readonly text: string;
}

/** Collects vertex classes; identical bodies share one class. */
export class CodeletSet {
  private readonly byKey = new Map<string, string>();
  private readonly classes: { name: string; template: boolean; body: string; instances: Set<string>; inner?: string }[] = [];
  private readonly counters = new Map<string, number>();

  /**
   * Registers a vertex class. `body(name)` returns the full class text for the given class name
   * (the text must depend only on the name and the key). A templated class lists the template
   * arguments it may be instantiated with (float and half for float vertices); only those the host
   * uses (`vertexName`) are instantiated. Returns the class name. With `inner`, `body(name)` is a
   * namespace `name` holding the vertex class `inner` (a custom op's codelet, kept apart from
   * every other codelet's names).
   */
  add(prefix: string, key: string, body: (name: string) => string, variants?: readonly string[], inner?: string): string {
    const k = `${prefix}\u0000${key}`;
    const known = this.byKey.get(k);
    if (known) return known;
    const n = this.counters.get(prefix) ?? 0;
    this.counters.set(prefix, n + 1);
    const name = `${prefix}${n}`;
    this.byKey.set(k, name);
    this.classes.push({ name, template: variants !== undefined, body: body(name), instances: new Set(), ...(inner ? { inner } : {}) });
    return name;
  }

  /** The host-side vertex name of a class, recording the template instance used. */
  vertexName(name: string, typeArgs?: string): string {
    const c = this.classes.find((x) => x.name === name);
    if (!c) throw new Error(`internal: unknown vertex class ${name}`);
    if (c.template) {
      if (!typeArgs) throw new Error(`internal: vertex class ${name} needs template arguments`);
      c.instances.add(typeArgs);
      return `tg::${name}<${typeArgs}>`;
    }
    return `tg::${name}${c.inner ? `::${c.inner}` : ''}`;
  }

  /** Names of the vertices the host program instantiates. */
  vertexNames(): string[] {
    const out: string[] = [];
    for (const c of this.classes) {
      if (!c.template) out.push(`tg::${c.name}${c.inner ? `::${c.inner}` : ''}`);
      else for (const i of [...c.instances].sort()) out.push(`tg::${c.name}<${i}>`);
    }
    return out;
  }

  /** codelets.cpp; the random number generator only for a module that draws random numbers. */
  render(header: string, random: boolean): string {
    const parts = [header, '#include <poplar/Vertex.hpp>', '#include <cmath>', '', 'using namespace poplar;', '', PRELUDE, ...(random ? [RANDOM_PRELUDE] : [])];
    parts.push('namespace tg {', '');
    for (const c of this.classes) {
      // a template the host never instantiates is left out (popc would compile no vertex from it)
      if (c.template && c.instances.size === 0) continue;
      parts.push(c.body);
      // explicit instances, as popc needs them for templated vertices
      if (c.template) for (const i of [...c.instances].sort()) parts.push(`template class ${c.name}<${i}>;`);
      parts.push('');
    }
    parts.push('} // namespace tg', '');
    return parts.join('\n');
  }
}
