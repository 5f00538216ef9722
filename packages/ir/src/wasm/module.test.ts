import fc from 'fast-check';
import wabtInit from 'wabt';
import { MAX_MODULE_BYTES, WasmModuleError, WasmRunError, checkWasmModule, runWasmKernel } from './module.js';

/**
 * Reference-kernel modules are checked before use and run bounded: malformed, oversized and
 * hostile modules get a message naming the problem, never a crash or a hang.
 */

let wabt: Awaited<ReturnType<typeof wabtInit>>;
beforeAll(async () => {
  wabt = await wabtInit();
});

const wasm = (wat: string, features: Record<string, boolean> = {}) => new Uint8Array(wabt.parseWat('t.wat', wat, features).toBinary({}).buffer);

/** (x, y, n_x, n_y, scale) -> (): y = scale·x */
const SCALE = `(module
  (import "env" "memory" (memory 1 4))
  (func (export "scale") (param $x i32) (param $y i32) (param $nx i32) (param $ny i32) (param $s f32) (local $i i32)
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (local.get $ny)))
      (f32.store (i32.add (local.get $y) (i32.shl (local.get $i) (i32.const 2)))
        (f32.mul (local.get $s) (f32.load (i32.add (local.get $x) (i32.shl (local.get $i) (i32.const 2))))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next)))))`;
const PARAMS = ['i32', 'i32', 'i32', 'i32', 'f32'] as const;

/** The problem checkWasmModule reports for a module (or 'ok'). */
function problem(bytes: Uint8Array, entry = 'k', params: readonly ('i32' | 'f32')[] = []): string {
  try {
    checkWasmModule(bytes, entry, params);
    return 'ok';
  } catch (e) {
    if (e instanceof WasmModuleError) return e.message;
    throw e;
  }
}

/** The failure of running a module with no operands (or 'ok'). */
function runProblem(bytes: Uint8Array, budget: number): string {
  try {
    runWasmKernel(checkWasmModule(bytes, 'k', [], budget), [], [], []);
    return 'ok';
  } catch (e) {
    if (e instanceof WasmRunError) return e.message;
    throw e;
  }
}

const MEM = '(memory (export "memory") 1 1)';

test('a valid kernel runs: pointers, counts and attributes as documented', () => {
  const m = checkWasmModule(wasm(SCALE), 'scale', PARAMS);
  expect(Array.from(runWasmKernel(m, [new Float32Array([1, -2, 3])], [3], [0.5])[0]!)).toEqual([0.5, -1, 1.5]);
  // inputs larger than the initial memory: it grows within its maximum
  const big = new Float32Array(20000).fill(2);
  expect(runWasmKernel(m, [big], [20000], [3])[0]!.every((v) => v === 6)).toBe(true);
});

test('data goes above __heap_base when the module exports it', () => {
  // the module keeps a constant at address 0..3 and exports __heap_base = 16
  const m = wasm(`(module (memory (export "memory") 1 1) (data (i32.const 0) "\\00\\00\\80\\3f")
    (global (export "__heap_base") i32 (i32.const 16))
    (func (export "k") (param $x i32) (param $y i32) (param i32 i32)
      (f32.store (local.get $y) (f32.add (f32.load (local.get $x)) (f32.load (i32.const 0))))))`);
  const out = runWasmKernel(checkWasmModule(m, 'k', ['i32', 'i32', 'i32', 'i32']), [new Float32Array([2])], [1], []);
  expect(Array.from(out[0]!)).toEqual([3]);
});

test('malformed modules', () => {
  expect(problem(new Uint8Array([1, 2, 3]))).toBe('is not a WebAssembly binary (it does not start with \\0asm)');
  const good = wasm(`(module ${MEM} (func (export "k")))`);
  expect(problem(good.slice(0, good.length - 3))).toMatch(/^is not a valid WebAssembly module: .+/);
  expect(problem(new Uint8Array(MAX_MODULE_BYTES + 1))).toBe(`is ${MAX_MODULE_BYTES + 1} bytes, above the limit of ${MAX_MODULE_BYTES} bytes`);
});

test('memory must be bounded, within the limit, and reachable', () => {
  expect(problem(wasm('(module (memory (export "memory") 1) (func (export "k")))'))).toBe(
    'its memory declares no maximum size; declare one of at most 256 pages (16 MiB), e.g. (memory 1 16)',
  );
  expect(problem(wasm('(module (memory (export "memory") 1 65536) (func (export "k")))'))).toBe('its memory declares a maximum of 65536 pages, above the limit of 256 pages (16 MiB)');
  expect(problem(wasm('(module (import "env" "memory" (memory 1 300)) (func (export "k")))'))).toBe("its imported memory 'env.memory' declares a maximum of 300 pages, above the limit of 256 pages (16 MiB)");
  expect(problem(wasm('(module (import "env" "memory" (memory 1)) (func (export "k")))'))).toMatch(/^its imported memory 'env.memory' declares no maximum size/);
  expect(problem(wasm('(module (func (export "k")))'))).toMatch(/^has no memory/);
  expect(problem(wasm('(module (memory 1 1) (func (export "k")))'))).toBe('does not export its memory; add (export "memory" (memory 0))');
});

test('imports other than memory, missing exports and wrong signatures', () => {
  expect(problem(wasm(`(module (import "env" "log" (func (param i32))) ${MEM} (func (export "k")))`))).toBe(
    "imports 'env.log' (a function); a reference kernel may import nothing but its memory",
  );
  expect(problem(wasm(`(module (import "env" "g" (global i32)) ${MEM} (func (export "k")))`))).toBe("imports 'env.g' (a global); a reference kernel may import nothing but its memory");
  expect(problem(wasm(`(module ${MEM} (func (export "other")))`))).toBe("does not export a function 'k' (it exports 'other'); the kernel must be exported as 'k' with signature () -> ()");
  expect(problem(wasm(`(module ${MEM} (func (export "k") (param f32) (result i32) (i32.const 0)))`), 'k', ['i32'])).toBe(
    "exports 'k' with signature (f32) -> i32, but the kernel must take (i32) -> ()",
  );
  expect(problem(wasm(`(module ${MEM} (global (export "k") i32 (i32.const 0)))`))).toMatch(/^does not export a function 'k' \(it exports no functions\)/);
  expect(problem(wasm(`(module ${MEM} (func $s (loop $l (br $l))) (start $s) (func (export "k")))`))).toBe(
    'has a start function; a reference kernel may run code only when its entry is called',
  );
  expect(problem(wasm(`(module ${MEM} (global (export "__tilegraph_fuel") i32 (i32.const 0)) (func (export "k")))`))).toMatch(/reserves for its step counter/);
});

test('extensions the step counter cannot follow are refused by name', () => {
  const simd = wasm(`(module ${MEM} (func (export "k") (drop (v128.const i32x4 0 0 0 0))))`, { simd: true });
  expect(problem(simd)).toMatch(/^uses the instruction 0xfd \(SIMD, exceptions, tail calls and other extensions are not supported\)/);
});

test('hostile kernels stop at the step budget or the stack limit', () => {
  expect(runProblem(wasm(`(module ${MEM} (func (export "k") (loop $l (br $l))))`), 1000)).toBe('exceeded its step budget of 1000 instructions');
  // nested loops: the inner one counts every iteration
  expect(runProblem(wasm(`(module ${MEM} (func (export "k") (local i32) (loop $a (loop $b (br_if $b (i32.const 1))) (br $a))))`), 5000)).toBe(
    'exceeded its step budget of 5000 instructions',
  );
  // unbounded recursion: the budget or the stack, whichever comes first
  expect(runProblem(wasm(`(module ${MEM} (func $r (call $r)) (func (export "k") (call $r)))`), 10_000_000)).toMatch(/^(exceeded its step budget|overflowed the call stack)/);
  expect(runProblem(wasm(`(module ${MEM} (func (export "k") unreachable))`), 1000)).toMatch(/^trapped while running: .*unreachable/);
  // a loop body costs its length at every iteration: 97 statements of 4 instructions and 9 more
  // (the counter, the test, br_if, end) make 397, and the function body outside the loop 2 (loop,
  // end): 1000 iterations take 397,002 instructions exactly
  const body = Array.from({ length: 97 }, () => '(local.set $v (f32.add (local.get $v) (f32.const 1)))').join(' ');
  const long = wasm(`(module ${MEM} (func (export "k") (local $i i32) (local $v f32) (loop $l ${body} (local.set $i (i32.add (local.get $i) (i32.const 1))) (br_if $l (i32.lt_u (local.get $i) (i32.const 1000))))))`);
  expect(runProblem(long, 397_001)).toBe('exceeded its step budget of 397001 instructions');
  expect(runProblem(long, 397_002)).toBe('ok');
});

test('tensors that do not fit the memory maximum are refused', () => {
  const m = checkWasmModule(wasm(SCALE), 'scale', PARAMS);
  expect(() => runWasmKernel(m, [new Float32Array(40000)], [40000 * 4], [1])).toThrow('needs 800000 bytes of memory for its tensors, more than its memory\'s declared maximum allows');
});

test('property: mutated modules give a diagnostic or a valid run, never a crash or a hang', () => {
  const base = wasm(SCALE);
  const input = new Float32Array([1, 2, 3]);
  fc.assert(
    fc.property(
      fc.array(fc.record({ at: fc.nat(base.length - 1), value: fc.nat(255) }), { minLength: 1, maxLength: 4 }),
      fc.nat(base.length),
      (edits, cut) => {
        const bytes = base.slice(0, Math.max(cut, 8));
        for (const e of edits) if (e.at < bytes.length) bytes[e.at] = e.value;
        let m;
        try {
          m = checkWasmModule(bytes, 'scale', PARAMS, 20_000);
        } catch (e) {
          expect(e).toBeInstanceOf(WasmModuleError);
          expect((e as Error).message.length).toBeGreaterThan(0);
          return;
        }
        try {
          const out = runWasmKernel(m, [input], [3], [2]);
          expect(out).toHaveLength(1);
          expect(out[0]).toHaveLength(3);
        } catch (e) {
          expect(e).toBeInstanceOf(WasmRunError);
        }
      },
    ),
    { numRuns: 400, seed: 7 },
  );
});

/** Random stack-neutral statements over locals $a, $c (i32) and $v (f32), loops labelled by depth. */
function statementArb(depth: number): fc.Arbitrary<string> {
  const leaf = fc.oneof(
    fc.integer({ min: -5, max: 5 }).map((k) => `(local.set $a (i32.add (local.get $a) (i32.const ${k})))`),
    fc.integer({ min: 0, max: 200_000 }).map((at) => `(f32.store (i32.const ${at}) (local.get $v))`),
    fc.integer({ min: 0, max: 200_000 }).map((at) => `(local.set $v (f32.add (local.get $v) (f32.load (i32.const ${at}))))`),
    fc.integer({ min: 0, max: 3 }).map((k) => `(drop (memory.grow (i32.const ${k})))`),
    fc.integer({ min: 0, max: 70_000 }).map((n) => `(memory.fill (i32.const 0) (i32.const 7) (i32.const ${n}))`),
    fc.constant('(call $helper (local.get $a))'),
    fc.constant('(local.set $v (f32.div (local.get $v) (f32.const 0)))'),
    fc.constant('(if (i32.eq (local.get $a) (i32.const 3)) (then unreachable))'),
  );
  if (depth === 0) return leaf;
  const body = fc.array(statementArb(depth - 1), { maxLength: 4 }).map((xs) => xs.join(' '));
  return fc.oneof(
    { weight: 3, arbitrary: leaf },
    fc.tuple(body, fc.integer({ min: 0, max: 50 })).map(([b, n]) => `(local.set $c (i32.const 0)) (loop $l${depth} ${b} (local.set $c (i32.add (local.get $c) (i32.const 1))) (br_if $l${depth} (i32.lt_u (local.get $c) (i32.const ${n}))))`),
    body.map((b) => `(loop $l${depth} ${b} (br $l${depth}))`),
    fc.tuple(body, body).map(([x, y]) => `(block $b${depth} ${x} (br_if $b${depth} (local.get $a)) ${y})`),
    fc.tuple(body, body).map(([x, y]) => `(if (local.get $a) (then ${x}) (else ${y}))`),
  );
}

test('property: random valid kernels (loops, calls, recursion, traps, memory growth) end in a result or a run error', () => {
  const seen = { results: 0, budget: 0, traps: 0 };
  fc.assert(
    fc.property(fc.array(statementArb(3), { maxLength: 5 }), fc.boolean(), (stmts, recursive) => {
      // $helper recurses on its argument (without end when it is negative) or returns
      const helper = recursive ? '(if (i32.ne (local.get 0) (i32.const 0)) (then (call $helper (i32.sub (local.get 0) (i32.const 1)))))' : '';
      const bytes = wasm(
        `(module (import "env" "memory" (memory 1 8)) (func $helper (param i32) ${helper})
          (func (export "k") (param $x i32) (param $y i32) (param i32 i32) (local $a i32) (local $c i32) (local $v f32)
            (local.set $v (f32.load (local.get $x))) ${stmts.join(' ')} (f32.store (local.get $y) (local.get $v))))`,
        { bulk_memory: true },
      );
      const m = checkWasmModule(bytes, 'k', ['i32', 'i32', 'i32', 'i32'], 100_000);
      try {
        const out = runWasmKernel(m, [new Float32Array([1.5])], [1], []);
        expect(out[0]).toHaveLength(1);
        seen.results++;
        // the step counter changes nothing else: the module as written gives the same bits
        // (the input at offset 0, the output at 16, as the runner places them)
        const memory = new WebAssembly.Memory({ initial: 1, maximum: 8 });
        new Float32Array(memory.buffer, 0, 1)[0] = 1.5;
        const raw = new WebAssembly.Instance(new WebAssembly.Module(bytes), { env: { memory } });
        (raw.exports['k'] as (...a: number[]) => void)(0, 16, 1, 1);
        expect(Object.is(new Float32Array(memory.buffer, 16, 1)[0], out[0]![0])).toBe(true);
      } catch (e) {
        expect(e).toBeInstanceOf(WasmRunError);
        if ((e as Error).message.startsWith('exceeded its step budget')) seen.budget++;
        else seen.traps++;
      }
    }),
    { numRuns: 300, seed: 11 },
  );
  // the generator reaches every outcome
  expect(Math.min(seen.results, seen.budget, seen.traps)).toBeGreaterThan(10);
});
