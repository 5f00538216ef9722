import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { listCache } from '@tilegraph/runtime';
import { BenchRow } from '../report/bench-results.js';
import { CompilePhases, CompileRequest, compileInChild } from './compile-child.js';
import { measureImport } from './import.js';
import { BERT_BASE, writeTransformerOnnx } from './make-transformer.js';
import { BenchContext, BenchOutput, PeerInput, computedRow, measuredRow, onnxruntimeVersion } from './results.js';

/**
 * Compile benchmark: the steps of `tilegraph compile -o` (model file to graph, passes, C++
 * generation, the C++ build for the emulated IPU, export) in a fresh process, each timed, beside
 * onnxruntime-node's InferenceSession.create in a fresh process. Every compile gets a cache folder
 * of its own holding the libraries built once per toolchain (poplar-host, the host support
 * library) and no executable: copies of the entries of a seed cache, built first by compiling a
 * small model of the same kind. The compiles and the session creates take turns.
 *
 * Cases: examples/mlp.tg trained with SGD (and the oracle MLP and CNN ONNX files for inference,
 * the same file for both); examples/bert.tg (BERT-base-shaped, 12 layers on 4 IPUs) trained with
 * Adam beside onnxruntime on an ONNX encoder of the same layers, for inference.
 */

const here = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(here, '../../..');
const ORACLES = path.resolve(ROOT, '../shared/oracles');
const BERT = path.join(ROOT, 'examples/bert.tg');
const BENCH = 'compile';
const TILEGRAPH = 'tilegraph compile -o';
const ORT = 'onnxruntime InferenceSession.create';
/** BERT builds take minutes on a small machine: fewer repetitions unless --repeat says otherwise. */
const BERT_REPEAT = 3;
const LIBRARY = /^(poplar-host|tilegraph-host)-/;
/** The size row: all the host program's translation units (those a large program has). */
const HOST_PROGRAM = 'generated host program (host.cpp, host_graph.cpp, host_layers.cpp)';

interface Case {
  readonly name: string;
  readonly req: Omit<CompileRequest, 'out'>;
  /** A small model whose compile builds the same libraries (the seed of the caches). */
  readonly seed: Omit<CompileRequest, 'out'>;
  /** The ONNX file onnxruntime loads, or why there is none. */
  readonly peer: { file: string } | { unavailable: string };
  readonly repeat: number;
  /** Every phase as a row, or the C++ build alone. */
  readonly phases: 'all' | 'build';
}

const PHASES: [keyof CompilePhases, string][] = [
  ['loadMs', 'model file to graph'],
  ['passesMs', 'passes'],
  ['generateMs', 'C++ generation'],
  ['buildMs', 'C++ build (initial state drawn and written meanwhile)'],
  ['exportMs', 'export (the executable and header written, the file renamed)'],
];

const totalMs = (p: CompilePhases) => p.loadMs + p.passesMs + p.generateMs + p.buildMs + p.exportMs;

/** The library entries of the seed cache, copied into a new cache folder under `home` and checked once there (not measured). */
function freshCache(seedHome: string, home: string): void {
  const seed = path.join(seedHome, 'tilegraph');
  const dir = path.join(home, 'tilegraph');
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  for (const e of fs.readdirSync(seed)) if (LIBRARY.test(e)) fs.cpSync(path.join(seed, e), path.join(dir, e), { recursive: true, preserveTimestamps: true });
  // a check reads every byte once and records the files' signature, as the first use of a library does
  const bad = listCache(dir).filter((e) => !e.valid);
  if (bad.length) throw new Error(`the copied cache entry ${bad[0]!.name} is not usable: ${bad[0]!.problem}`);
}

const libraries = (home: string) => new Set(fs.readdirSync(path.join(home, 'tilegraph')).filter((e) => LIBRARY.test(e)));

export async function benchCompile(ctx: BenchContext): Promise<BenchOutput> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tilegraph-bench-compile-'));
  const seedHome = path.join(tmp, 'seed');
  fs.mkdirSync(seedHome, { mode: 0o700 });
  const written: string[] = [];
  try {
    const layers = ctx.quick ? 2 : BERT_BASE.layers;
    const ipus = ctx.quick ? 2 : 4;
    const encoder = writeTransformerOnnx({ ...BERT_BASE, layers });
    written.push(path.dirname(encoder));
    const oracle = (f: string): Case['peer'] => (fs.existsSync(path.join(ORACLES, f)) ? { file: path.join(ORACLES, f) } : { unavailable: `${f} is not at ${ORACLES}` });
    const mlp = { file: path.join(ROOT, 'examples/mlp.tg'), flags: { pipeline: 'training', optimizer: 'sgd' } };
    const onnxInference = (f: string): Omit<CompileRequest, 'out'> => ({ file: path.join(ORACLES, f), flags: { pipeline: 'inference', batchSize: 32 } });
    const bert = (args: string[]): Omit<CompileRequest, 'out'> => ({ file: BERT, flags: { pipeline: 'training', optimizer: 'adam', arg: [`ipus=${ipus}`, ...args] } });
    const bertRepeat = ctx.repeatGiven ? ctx.repeat : Math.min(ctx.repeat, BERT_REPEAT);
    const cases: Case[] = [
      { name: 'examples/mlp.tg, training (SGD)', req: mlp, seed: mlp, peer: oracle('mlp.onnx'), repeat: ctx.repeat, phases: 'all' },
      ...(fs.existsSync(path.join(ORACLES, 'mlp.onnx'))
        ? (['mlp', 'cnn'] as const).map((m): Case => ({ name: `oracle ${m.toUpperCase()} (${m}.onnx), inference`, req: onnxInference(`${m}.onnx`), seed: onnxInference(`${m}.onnx`), peer: oracle(`${m}.onnx`), repeat: ctx.repeat, phases: 'build' }))
        : []),
      {
        name: `examples/bert.tg, ${layers} layers on ${ipus} IPUs, training (Adam)`,
        req: bert([`layers=${layers}`]),
        // the same kind of program, narrow: its host program includes the same headers, so it builds the same libraries
        seed: bert([`layers=${ipus}`, 'd_model=64', 'heads=2', 'ff=128', 'seq=16']),
        peer: { file: encoder },
        repeat: bertRepeat,
        phases: 'all',
      },
    ];
    const rows: BenchRow[] = [];
    const notes: string[] = [];
    let reps = 0;
    for (const c of cases) {
      ctx.log(`${c.name}: building the libraries into the seed cache (not measured)`);
      compileInChild({ ...c.seed, out: path.join(tmp, 'seed.tgx') }, seedHome);
      ctx.log(`${c.name}: ${c.repeat} compiles${'file' in c.peer ? ' and session creates' : ''}, taking turns`);
      const runs: (CompilePhases & { wallMs: number })[] = [];
      const ort: number[] = [];
      for (let i = 0; i < c.repeat; i++) {
        for (const which of i % 2 ? (['ort', 'tilegraph'] as const) : (['tilegraph', 'ort'] as const)) {
          if (which === 'ort') {
            if ('file' in c.peer) ort.push(measureImport('ort', c.peer.file).ms);
            continue;
          }
          const home = path.join(tmp, `rep-${reps++}`);
          freshCache(seedHome, home);
          const before = libraries(home);
          const r = compileInChild({ ...c.req, out: path.join(home, 'out.tgx') }, home);
          const built = [...libraries(home)].filter((e) => !before.has(e));
          if (r.cached) throw new Error(`${c.name}: expected a fresh build, but the executable cache held it`);
          if (built.length) throw new Error(`${c.name}: the compile built the libraries ${built.join(', ')} (the seed model includes other headers); the figures would not be of a warm cache`);
          runs.push(r);
          fs.rmSync(home, { recursive: true, force: true });
        }
      }
      const peers: PeerInput[] = ['file' in c.peer ? { name: ORT, samples: ort } : { name: ORT, unavailable: c.peer.unavailable }];
      const row = (subject: string, samples: number[], withPeers = false) =>
        measuredRow({ benchmark: BENCH, case: c.name, subject, metric: 'time', unit: 'ms', higherIsBetter: false, samples, ...(withPeers ? { peers } : {}) });
      rows.push(row(TILEGRAPH, runs.map(totalMs), true));
      for (const [k, label] of PHASES) if (c.phases === 'all' || k === 'buildMs') rows.push(row(`of which ${label}`, runs.map((r) => r[k] as number)));
      if (c.phases === 'all') rows.push(row('the whole process (node start and modules too)', runs.map((r) => r.wallMs)));
      if (c.req.file === BERT) rows.push(computedRow({ benchmark: BENCH, case: c.name, subject: HOST_PROGRAM, metric: 'size', unit: 'bytes', higherIsBetter: false, value: runs[0]!.hostCppBytes }));
    }
    if (!ctx.quick) {
      // host.cpp should grow with the number of distinct layers, not their count
      const two = compileInChild(bert(['layers=2']), seedHome).hostCppBytes;
      const full = rows.find((r) => r.subject === HOST_PROGRAM)!.value.median;
      rows.push(computedRow({ benchmark: BENCH, case: `examples/bert.tg, 2 layers on ${ipus} IPUs, training (Adam)`, subject: HOST_PROGRAM, metric: 'size', unit: 'bytes', higherIsBetter: false, value: two }));
      notes.push(`the host program of the ${layers}-layer encoder is ${(full / two).toFixed(2)}× that of the 2-layer one`);
    }
    notes.push(
      `${TILEGRAPH}: the steps of the command (buildStep, generatePoplar, the build through the executable cache, the export) in a fresh process, timed from the model file to the written executable; onnxruntime: InferenceSession.create in a fresh process, timed around the call`,
      "each compile has a cache folder of its own holding the libraries built once per toolchain (poplar-host and the host support library with their precompiled headers, copied from a seed cache and checked before the compile) and no executable",
      'examples/mlp.tg is the oracle MLP (Linear 16→32, ReLU, Linear 32→10; batch 4): tilegraph compiles its SGD training step, onnxruntime loads mlp.onnx for inference; the oracle rows compile that same ONNX file for inference (batch 32), like for like',
      `examples/bert.tg (d_model 768, 12 heads, ff 3072, seq 128, batch 1, mean pooling and a 2-class head) is compiled for training with Adam; onnxruntime loads an ONNX export of the same ${layers} encoder layers (random weights, no head) for inference only, a smaller program than the training step (forward, backward and the Adam update)`,
      `BERT: ${bertRepeat} repetitions${ctx.repeatGiven ? '' : ` (at most ${BERT_REPEAT} unless --repeat is given: each build takes minutes)`}${ctx.quick ? '; --quick: 2 layers on 2 IPUs' : ''}`,
    );
    return {
      title: 'compile latency: tilegraph compile -o (model file, passes, C++ generation and build for the emulated IPU, export) with the libraries built and the executable not, beside onnxruntime-node session creation',
      rows,
      notes,
      versions: { onnxruntime: onnxruntimeVersion() ?? 'unknown' },
    };
  } finally {
    for (const d of [tmp, ...written]) fs.rmSync(d, { recursive: true, force: true });
  }
}
