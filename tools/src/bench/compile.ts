import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BenchRow } from '../report/bench-results.js';
import { measureImport } from './import.js';
import { BERT_BASE, writeTransformerOnnx } from './make-transformer.js';
import { BenchContext, BenchOutput, PeerInput, computedRow, measuredRow, onnxruntimeVersion } from './results.js';

/**
 * Compile benchmark: `tilegraph compile MODEL -o FILE` as a user runs it (a fresh process: import,
 * passes, C++ generation and the C++ build for the emulated IPU), with an executable cache that
 * holds the libraries built once per toolchain (poplar-host, the host support library) but no
 * executable, beside onnxruntime-node's
 * InferenceSession.create on the same ONNX file in a fresh process. The two take turns. The
 * size of the generated host program is reported for encoders of two depths (it should grow
 * with the number of distinct layers, not their count).
 */

const here = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(here, '../../..');
const CLI = path.join(ROOT, 'tools/dist/cli.js');
const ORACLES = path.resolve(ROOT, '../shared/oracles');
const BENCH = 'compile';
const TILEGRAPH = 'tilegraph compile -o';
const ORT = 'onnxruntime InferenceSession.create';

interface Case {
  readonly name: string;
  readonly file: string;
  readonly args: readonly string[];
  /** The ONNX file onnxruntime loads, or why there is none. */
  readonly peer: { file: string } | { unavailable: string };
}

interface CompileRun {
  /** Wall time of the whole command (ms). */
  ms: number;
  /** The C++ build's share, as the command reports it (ms). */
  buildMs: number;
}

/** Removes the executables from the cache, keeping the libraries built once per toolchain (poplar-host, the host support library). */
function dropExecutables(cacheHome: string): void {
  const dir = path.join(cacheHome, 'tilegraph');
  if (!fs.existsSync(dir)) return;
  for (const e of fs.readdirSync(dir)) if (!e.startsWith('poplar-host-') && !e.startsWith('tilegraph-host-')) fs.rmSync(path.join(dir, e), { recursive: true, force: true });
}

function cli(args: readonly string[], cacheHome: string): { ms: number; stdout: string } {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', maxBuffer: 64 << 20, env: { ...process.env, XDG_CACHE_HOME: cacheHome } });
  const ms = performance.now() - t0;
  if (r.status !== 0) throw new Error(`tilegraph ${args.join(' ')} failed (exit ${r.status}): ${(r.stderr || r.stdout).trim().split('\n').slice(-5).join('\n')}`);
  return { ms, stdout: r.stdout };
}

function compileOnce(c: Case, cacheHome: string, out: string): CompileRun {
  dropExecutables(cacheHome);
  const { ms, stdout } = cli(['compile', c.file, ...c.args, '-o', out, '--json', '--no-progress'], cacheHome);
  const doc = JSON.parse(stdout.trim().split('\n').pop()!) as { executable: { seconds: number; cache: string } };
  if (doc.executable.cache !== 'miss') throw new Error(`${c.name}: expected a fresh build, the executable cache said ${doc.executable.cache}`);
  return { ms, buildMs: doc.executable.seconds * 1000 };
}

function hostBytes(file: string, args: readonly string[], cacheHome: string, dir: string): number {
  fs.rmSync(dir, { recursive: true, force: true });
  cli(['compile', file, ...args, '--emit-cpp', dir], cacheHome);
  return fs.statSync(path.join(dir, 'host.cpp')).size;
}

export async function benchCompile(ctx: BenchContext): Promise<BenchOutput> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tilegraph-bench-compile-'));
  const cacheHome = path.join(tmp, 'cache');
  fs.mkdirSync(cacheHome, { mode: 0o700 });
  const written: string[] = [];
  const onnx = (n: number) => {
    const f = writeTransformerOnnx({ ...BERT_BASE, layers: n });
    written.push(path.dirname(f));
    return f;
  };
  try {
    const layers = ctx.quick ? 2 : BERT_BASE.layers;
    const encoder = onnx(layers);
    const oracle = (f: string): Case['peer'] => (fs.existsSync(path.join(ORACLES, f)) ? { file: path.join(ORACLES, f) } : { unavailable: `${f} is not at ${ORACLES}` });
    const cases: Case[] = [
      { name: 'examples/mlp.tg, training (SGD)', file: path.join(ROOT, 'examples/mlp.tg'), args: [], peer: { unavailable: 'a model-language file: onnxruntime has no form of it' } },
      ...(fs.existsSync(path.join(ORACLES, 'mlp.onnx'))
        ? [
            { name: 'oracle MLP (mlp.onnx), inference', file: path.join(ORACLES, 'mlp.onnx'), args: ['--pipeline', 'inference', '--batch-size', '32'], peer: oracle('mlp.onnx') },
            { name: 'oracle CNN (cnn.onnx), inference', file: path.join(ORACLES, 'cnn.onnx'), args: ['--pipeline', 'inference', '--batch-size', '32'], peer: oracle('cnn.onnx') },
          ]
        : []),
      { name: `${layers}-layer BERT-base-wide encoder, inference`, file: encoder, args: ['--pipeline', 'inference', '--batch-size', '1'], peer: { file: encoder } },
      { name: `${layers}-layer BERT-base-wide encoder, training (MSE, SGD)`, file: encoder, args: ['--loss', 'mse', '--batch-size', '1'], peer: { file: encoder } },
    ];
    ctx.log(`building the poplar-host library into a fresh cache (not measured)`);
    compileOnce(cases[0]!, cacheHome, path.join(tmp, 'warm.tgx'));
    const rows: BenchRow[] = [];
    for (const c of cases) {
      ctx.log(`${c.name}: ${ctx.repeat} compiles${'file' in c.peer ? ' and session creates' : ''}, taking turns`);
      const runs: CompileRun[] = [];
      const ort: number[] = [];
      for (let i = 0; i < ctx.repeat; i++) {
        const order = i % 2 ? (['ort', 'tilegraph'] as const) : (['tilegraph', 'ort'] as const);
        for (const which of order) {
          if (which === 'tilegraph') runs.push(compileOnce(c, cacheHome, path.join(tmp, 'out.tgx')));
          else if ('file' in c.peer) ort.push(measureImport('ort', c.peer.file).ms);
        }
      }
      const peers: PeerInput[] = ['file' in c.peer ? { name: ORT, samples: ort } : { name: ORT, unavailable: c.peer.unavailable }];
      rows.push(
        measuredRow({ benchmark: BENCH, case: c.name, subject: TILEGRAPH, metric: 'time', unit: 'ms', higherIsBetter: false, samples: runs.map((r) => r.ms), peers }),
        measuredRow({ benchmark: BENCH, case: c.name, subject: 'of which the C++ build', metric: 'time', unit: 'ms', higherIsBetter: false, samples: runs.map((r) => r.buildMs) }),
      );
    }
    const sizes: [number, number][] = [];
    for (const n of ctx.quick ? [2] : [2, BERT_BASE.layers]) {
      const file = n === layers ? encoder : onnx(n);
      const bytes = hostBytes(file, ['--loss', 'mse', '--batch-size', '1'], cacheHome, path.join(tmp, `emit-${n}`));
      sizes.push([n, bytes]);
      rows.push(computedRow({ benchmark: BENCH, case: `${n}-layer encoder, training`, subject: 'generated host.cpp', metric: 'size', unit: 'bytes', higherIsBetter: false, value: bytes }));
    }
    const notes = ['each compile is a fresh `tilegraph compile` process whose executable is not in the cache; the cache holds the libraries built once per toolchain (poplar-host and the host support library with its precompiled header)'];
    if (sizes.length === 2) notes.push(`host.cpp of the ${sizes[1]![0]}-layer encoder is ${(sizes[1]![1] / sizes[0]![1]).toFixed(2)}× that of the 2-layer one`);
    return {
      title: 'compile latency: `tilegraph compile -o` (import, passes, C++ generation and build for the emulated IPU) beside onnxruntime-node session creation on the same ONNX file',
      rows,
      notes,
      versions: { onnxruntime: onnxruntimeVersion() ?? 'unknown' },
    };
  } finally {
    for (const d of [tmp, ...written]) fs.rmSync(d, { recursive: true, force: true });
  }
}
