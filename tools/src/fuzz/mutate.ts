import fc from 'fast-check';

/**
 * Mutations of input files, as fast-check arbitraries: byte-level damage for every format and,
 * for text formats, edits a hostile or careless author makes — deep nesting, huge or odd
 * numbers, paths of special files, control characters, long runs of one construct.
 */

export type Mutation =
  | { readonly op: 'flip'; readonly at: number; readonly bit: number }
  | { readonly op: 'set'; readonly at: number; readonly value: number }
  | { readonly op: 'delete'; readonly at: number; readonly length: number }
  | { readonly op: 'duplicate'; readonly at: number; readonly length: number; readonly times: number }
  | { readonly op: 'truncate'; readonly at: number }
  | { readonly op: 'insert'; readonly at: number; readonly text: string }
  | { readonly op: 'number'; readonly nth: number; readonly value: string }
  | { readonly op: 'repeat'; readonly at: number; readonly text: string; readonly times: number };

/** Text a hostile file carries: nesting openers, extreme numbers, special paths, escapes, keywords. */
const FRAGMENTS = [
  '(', ')', '[', ']', '{', '}', ',', '"', '\\', '#', '//', '\n', ' ', '=', ':', '.', '-', '*', '+',
  '1e308', '-1', '0', '9007199254740993', '2147483648', '4294967296', 'NaN', 'inf', '1.5', '0x10', '-0',
  'import "/dev/zero"\n', 'import "../../../../etc/passwd"\n', 'import "std/../../x.tg"\n',
  'loc("/etc/passwd":1:1)', 'loc("/proc/self/environ":1:1)', '\u001b[2J', '\u202e', '\u0000', '\uffff',
  'for i in range(1000000) { }', 'if true { ', 'scope "s" { ', 'fn f(x) { return f(x) }\n', 'f32[', 'i64', 'f16',
  'setExecutionStrategy(PipelinedExecution(AutoStage.AutoIncrement))', 'replicationFactor(0)', 'deviceIterations(-1)',
  'Training.gradientAccumulation(1e9)', '"replication_factor": 1e300', '"device_iterations": "x"', 'null', '{}', '[]',
];

const NUMBERS = ['0', '-1', '1e308', '2147483647', '2147483648', '9007199254740992', '1e-320', 'NaN', '-0', '65536', '3.5', '100000'];

const mutation = (size: number): fc.Arbitrary<Mutation> => {
  const at = fc.nat({ max: Math.max(0, size) });
  return fc.oneof(
    fc.record({ op: fc.constant('flip' as const), at, bit: fc.nat({ max: 7 }) }),
    fc.record({ op: fc.constant('set' as const), at, value: fc.constantFrom(0, 0xff, 0x7f, 0x80, 0x0a, 0x22, 0x28, 0x5b) }),
    fc.record({ op: fc.constant('delete' as const), at, length: fc.integer({ min: 1, max: 64 }) }),
    fc.record({ op: fc.constant('duplicate' as const), at, length: fc.integer({ min: 1, max: 64 }), times: fc.integer({ min: 1, max: 50 }) }),
    fc.record({ op: fc.constant('truncate' as const), at }),
    fc.record({ op: fc.constant('insert' as const), at, text: fc.constantFrom(...FRAGMENTS) }),
    fc.record({ op: fc.constant('number' as const), nth: fc.nat({ max: 40 }), value: fc.constantFrom(...NUMBERS) }),
    // openers of every format: unclosed ones nest as deep as closed ones ('PipelinedExecution(' nests calls in an options file)
    fc.record({ op: fc.constant('repeat' as const), at, text: fc.constantFrom('(', '[', '-', 'if true { ', 'scope "s" { ', 'x + ', '{"a":', 'PipelinedExecution(', '{"k": '), times: fc.constantFrom(300, 1000, 5000, 20000) }),
  );
};

/** One to four mutations of a file of `size` bytes. */
export function mutations(size: number): fc.Arbitrary<Mutation[]> {
  return fc.array(mutation(size), { minLength: 1, maxLength: 4 });
}

const enc = new TextEncoder();

function splice(b: Uint8Array, at: number, remove: number, insert: Uint8Array): Uint8Array {
  const a = Math.min(at, b.length);
  const out = new Uint8Array(b.length - Math.min(remove, b.length - a) + insert.length);
  out.set(b.subarray(0, a), 0);
  out.set(insert, a);
  out.set(b.subarray(Math.min(b.length, a + remove)), a + insert.length);
  return out;
}

/** Applies mutations in order (positions wrap to the current length). */
export function applyMutations(bytes: Uint8Array, ms: readonly Mutation[]): Uint8Array {
  let b = bytes;
  for (const m of ms) {
    const at = b.length ? m.op === 'number' ? 0 : m.at % (b.length + 1) : 0;
    switch (m.op) {
      case 'flip':
        if (b.length) {
          b = b.slice();
          b[at % b.length]! ^= 1 << m.bit;
        }
        break;
      case 'set':
        if (b.length) {
          b = b.slice();
          b[at % b.length] = m.value;
        }
        break;
      case 'delete':
        b = splice(b, at, m.length, new Uint8Array());
        break;
      case 'duplicate': {
        const piece = b.slice(at, at + m.length);
        const rep = new Uint8Array(piece.length * m.times);
        for (let i = 0; i < m.times; i++) rep.set(piece, i * piece.length);
        b = splice(b, at, 0, rep);
        break;
      }
      case 'truncate':
        b = b.slice(0, at);
        break;
      case 'insert':
        b = splice(b, at, 0, enc.encode(m.text));
        break;
      case 'repeat':
        b = splice(b, at, 0, enc.encode(m.text.repeat(m.times)));
        break;
      case 'number': {
        // replaces the nth number of the text (counting from the start, wrapping)
        const text = Buffer.from(b).toString('latin1');
        const found = [...text.matchAll(/-?\d+(\.\d+)?(e-?\d+)?/g)];
        if (!found.length) break;
        const f = found[m.nth % found.length]!;
        b = splice(b, f.index!, f[0].length, enc.encode(m.value));
        break;
      }
    }
  }
  return b;
}
