import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as zlib from 'node:zlib';
import { spawnSync } from 'node:child_process';
import { DiagnosticError, Tensor, tensorsIdentical } from '@tilegraph/ir';
import { encodeNpy, parseNpy } from '../tools/src/data/npy.js';
import { encodeNpz, readNpz } from '../tools/src/data/arrays.js';
import { runCli } from './support/cli.js';

/**
 * `tilegraph run` with data files: inputs from .npy, .npz and JSON (the batch size taken from
 * them), outputs to an .npz, a folder of .npy files or one JSON document, exported executables
 * (.tgx) run directly, and the same declared output shapes on every backend.
 */

const run = (...args: string[]) => runCli(args, 300_000);

// ---- an independent writer of the formats, byte by byte ----

/** An .npy file: magic, version, header length, the header dict padded to 64 bytes, then `data`. */
function npyBytes(version: 1 | 2 | 3, dict: string, data: Uint8Array): Uint8Array {
  const prefix = version === 1 ? 10 : 12;
  const headerBytes = Buffer.from(dict, version === 3 ? 'utf8' : 'latin1');
  const total = Math.ceil((prefix + headerBytes.length + 1) / 64) * 64;
  const header = Buffer.concat([headerBytes, Buffer.alloc(total - prefix - headerBytes.length - 1, ' '), Buffer.from('\n')]);
  const head = Buffer.alloc(prefix);
  Buffer.from([0x93, ...Buffer.from('NUMPY'), version, 0]).copy(head);
  if (version === 1) head.writeUInt16LE(header.length, 8);
  else head.writeUInt32LE(header.length, 8);
  return Buffer.concat([head, header, data]);
}

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32(b: Uint8Array): number {
  let c = 0xffffffff;
  for (const x of b) c = CRC_TABLE[(c ^ x) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** A zip file (PKWARE APPNOTE): each member stored or deflated, then the central directory. */
function zipBytes(members: { name: string; data: Uint8Array; deflate?: boolean }[]): Uint8Array {
  const locals: Buffer[] = [];
  const central: Buffer[] = [];
  let offset = 0;
  for (const m of members) {
    const name = Buffer.from(m.name);
    const body = m.deflate ? zlib.deflateRawSync(m.data) : Buffer.from(m.data);
    const method = m.deflate ? 8 : 0;
    const crc = crc32(m.data);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(method, 8);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(body.length, 18);
    local.writeUInt32LE(m.data.length, 22);
    local.writeUInt16LE(name.length, 26);
    const dir = Buffer.alloc(46);
    dir.writeUInt32LE(0x02014b50, 0);
    dir.writeUInt16LE(20, 4);
    dir.writeUInt16LE(20, 6);
    dir.writeUInt16LE(method, 10);
    dir.writeUInt32LE(crc, 16);
    dir.writeUInt32LE(body.length, 20);
    dir.writeUInt32LE(m.data.length, 24);
    dir.writeUInt16LE(name.length, 28);
    dir.writeUInt32LE(offset, 42);
    locals.push(local, name, body);
    central.push(dir, name);
    offset += local.length + name.length + body.length;
  }
  const cd = Buffer.concat(central);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(members.length, 8);
  end.writeUInt16LE(members.length, 10);
  end.writeUInt32LE(cd.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, cd, end]);
}

const f32 = (xs: number[]) => new Uint8Array(Float32Array.from(xs).buffer);

function thrown(f: () => unknown): DiagnosticError {
  try {
    f();
  } catch (e) {
    return e as DiagnosticError;
  }
  throw new Error('expected an error');
}

describe('the .npy format', () => {
  test('a hand-built version 1.0 file: float32 [2,3]', () => {
    const t = parseNpy(npyBytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", f32([1, 2, 3, 4.5, -0, 1e-3])), 'a.npy');
    expect(t.dtype).toBe('float32');
    expect(t.shape).toEqual([2, 3]);
    expect(Array.from(t.data)).toEqual(Array.from(Float32Array.from([1, 2, 3, 4.5, -0, 1e-3])));
  });

  test('versions 2.0 and 3.0 (a UTF-8 header), scalars, big-endian and Fortran order', () => {
    const v2 = parseNpy(npyBytes(2, "{'descr': '<i4', 'fortran_order': False, 'shape': (), }", new Uint8Array(Int32Array.from([-7]).buffer)), 'b.npy');
    expect([v2.dtype, v2.shape, Array.from(v2.data)]).toEqual(['int32', [], [-7]]);
    const v3 = parseNpy(npyBytes(3, "{\"descr\": '<u4', 'fortran_order': False, 'shape': (2,), } ", new Uint8Array(Uint32Array.from([4294967295, 3]).buffer)), 'c.npy');
    expect([v3.dtype, Array.from(v3.data)]).toEqual(['uint32', [4294967295, 3]]);
    const be = Buffer.alloc(8);
    be.writeInt32BE(1, 0);
    be.writeInt32BE(-2, 4);
    expect(Array.from(parseNpy(npyBytes(1, "{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }", be), 'd.npy').data)).toEqual([1, -2]);
    // Fortran order stores columns first: [[0, 1, 2], [3, 4, 5]] is 0 3 1 4 2 5
    const fo = parseNpy(npyBytes(1, "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }", new Uint8Array(Float64Array.from([0, 3, 1, 4, 2, 5]).buffer)), 'e.npy');
    expect([fo.dtype, fo.shape, Array.from(fo.data)]).toEqual(['float32', [2, 3], [0, 1, 2, 3, 4, 5]]);
  });

  test('every supported dtype: f2 f8 i1 i2 i8 u1 u2 b1', () => {
    const one = (descr: string, bytes: number[]) => parseNpy(npyBytes(1, `{'descr': '${descr}', 'fortran_order': False, 'shape': (2,), }`, Uint8Array.from(bytes)), `${descr}.npy`);
    const h = one('<f2', [0x00, 0x3c, 0x00, 0xc0]); // 1.0, -2.0
    expect([h.dtype, Array.from(h.data)]).toEqual(['float16', [1, -2]]);
    expect(Array.from(one('<f8', [...new Uint8Array(Float64Array.from([0.1, -3]).buffer)]).data)).toEqual([Math.fround(0.1), -3]);
    expect(Array.from(one('|i1', [0xff, 0x7f]).data)).toEqual([-1, 127]);
    expect(Array.from(one('<i2', [0xff, 0xff, 0x00, 0x80]).data)).toEqual([-1, -32768]);
    expect(Array.from(one('<i8', [...new Uint8Array(BigInt64Array.from([-5n, 2147483647n]).buffer)]).data)).toEqual([-5, 2147483647]);
    expect(Array.from(one('|u1', [0, 255]).data)).toEqual([0, 255]);
    expect(Array.from(one('<u2', [0xff, 0xff, 1, 0]).data)).toEqual([65535, 1]);
    const b = one('|b1', [1, 0]);
    expect([b.dtype, Array.from(b.data)]).toEqual(['bool', [1, 0]]);
  });

  test('the writer round-trips every IR dtype and writes what the hand-built reader expects', () => {
    const ts = [
      Tensor.from('float32', [2, 2], [1.5, -0, NaN, Infinity]),
      Tensor.from('float16', [3], [65504, 2 ** -24, -1]),
      Tensor.from('int32', [1, 3], [-(2 ** 31), 0, 2 ** 31 - 1]),
      Tensor.from('uint32', [1], [2 ** 32 - 1]),
      Tensor.from('bool', [2], [1, 0]),
      Tensor.scalar('float32', 7),
    ];
    for (const t of ts) {
      const bytes = encodeNpy(t);
      expect((bytes.length - t.size * (t.dtype === 'float16' ? 2 : t.dtype === 'bool' ? 1 : 4)) % 64).toBe(0);
      expect(tensorsIdentical(parseNpy(bytes, 'x.npy'), t)).toBe(true);
    }
    expect(Buffer.from(encodeNpy(Tensor.from('float32', [2, 3], [1, 2, 3, 4.5, -0, 1e-3])))).toEqual(
      Buffer.from(npyBytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", f32([1, 2, 3, 4.5, -0, 1e-3]))),
    );
  });

  test.each([
    ['not an .npy file', Uint8Array.from([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]), /bad\.npy: not an \.npy file/],
    ['a truncated header', npyBytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", f32([1, 2])).subarray(0, 20), /bad\.npy: truncated \.npy header/],
    ['truncated data', npyBytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", f32([1, 2])), /bad\.npy: truncated data: shape \[3\] of '<f4' needs 12 bytes but the file has 8/],
    ['an unsupported dtype', npyBytes(1, "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", f32([1, 2])), /bad\.npy: dtype '<c8' is not supported/],
    ['a structured dtype', npyBytes(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", f32([1])), /bad\.npy: structured arrays/],
    ['a broken header', npyBytes(1, "{'descr': '<f4', 'fortran_order': Flase, 'shape': (1,), }", f32([1])), /bad\.npy: not a valid \.npy header/],
    ['a version 9 file', npyBytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", f32([1])).map((b, i) => (i === 6 ? 9 : b)), /bad\.npy: \.npy format version 9\.0 is not supported/],
    ['an int64 beyond int32', npyBytes(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", new Uint8Array(BigInt64Array.from([0n, 2n ** 40n]).buffer)), /bad\.npy: value 1099511627776 at \[1\] does not fit int32/],
  ])('%s is a diagnostic naming the file', (_what, bytes, message) => {
    const e = thrown(() => parseNpy(bytes, 'bad.npy'));
    expect(e).toBeInstanceOf(DiagnosticError);
    expect(e.message).toMatch(message);
  });
});

describe('the .npz format', () => {
  test('a hand-built zip with a stored and a deflated member', () => {
    const x = npyBytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", f32([1, 2]));
    const y = npyBytes(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", new Uint8Array(BigInt64Array.from([3n, 4n, 5n]).buffer));
    const arrays = readNpz('h.npz', zipBytes([{ name: 'x.npy', data: x }, { name: 'y.npy', data: y, deflate: true }]));
    expect([...arrays.keys()]).toEqual(['x', 'y']);
    expect(Array.from(arrays.get('x')!.tensor.data)).toEqual([1, 2]);
    expect(arrays.get('y')!.tensor.dtype).toBe('int32');
    expect(Array.from(arrays.get('y')!.tensor.data)).toEqual([3, 4, 5]);
    expect(arrays.get('y')!.source).toBe('h.npz:y');
  });

  test('the writer round-trips, and a damaged file is a diagnostic naming it', () => {
    const t = { a: Tensor.from('float32', [2], [1, 2]), 'b/c': Tensor.from('int32', [], [9]) };
    const back = readNpz('w.npz', encodeNpz(t));
    expect(tensorsIdentical(back.get('a')!.tensor, t.a)).toBe(true);
    expect(tensorsIdentical(back.get('b/c')!.tensor, t['b/c'])).toBe(true);
    expect(thrown(() => readNpz('broken.npz', Uint8Array.from([1, 2, 3]))).message).toMatch(/broken\.npz: not a valid \.npz file/);
    const other = zipBytes([{ name: 'notes.txt', data: Buffer.from('hi') }]);
    expect(thrown(() => readNpz('o.npz', other)).message).toMatch(/o\.npz: member 'notes\.txt' is not an \.npy array/);
  });
});

describe('run with data files', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tg-run-io-'));
  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));
  const at = (f: string) => path.join(tmp, f);
  // 6 samples: the batch of examples/mlp.tg (default 4) becomes 6
  const xs = Array.from({ length: 6 * 16 }, (_, i) => Math.sin(i) * 2);
  const ys = [0, 1, 2, 3, 4, 5];
  const x = Tensor.from('float32', [6, 16], xs);
  const y = Tensor.from('int32', [6], ys);
  fs.writeFileSync(at('x.npy'), encodeNpy(x));
  fs.writeFileSync(at('y.npy'), npyBytes(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (6,), }", new Uint8Array(BigInt64Array.from(ys.map(BigInt)).buffer)));
  fs.writeFileSync(at('all.npz'), encodeNpz({ x, y }));
  fs.writeFileSync(at('x.json'), JSON.stringify(Array.from({ length: 6 }, (_, r) => Array.from(x.data.slice(r * 16, (r + 1) * 16)))));
  fs.writeFileSync(at('y.json'), JSON.stringify(ys));
  const json = (r: { code: number | null; out: string; err: string }) => {
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    return JSON.parse(r.out) as { model: string; backend: string; batch_size?: number; time_ms: number; outputs: Record<string, { dtype: string; shape: number[]; data: unknown }> };
  };

  test('npy, npz and JSON inputs give the same outputs; the batch size comes from the inputs', () => {
    const a = json(run('run', 'examples/mlp.tg', '--input', `x=${at('x.npy')}`, '--input', `y=${at('y.npy')}`, '--json'));
    const b = json(run('run', 'examples/mlp.tg', '--inputs', at('all.npz'), '--json'));
    const c = json(run('run', 'examples/mlp.tg', '--input', `x=${at('x.json')}`, '--input', `y=${at('y.json')}`, '--json'));
    expect(a.model).toBe('mlp');
    expect(a.backend).toBe('reference');
    expect(a.batch_size).toBe(6);
    expect(typeof a.time_ms).toBe('number');
    expect(a.outputs['logits']!.shape).toEqual([6, 10]);
    expect(a.outputs['logits']!.dtype).toBe('float32');
    expect(a.outputs['loss']).toMatchObject({ dtype: 'float32', shape: [] });
    expect(typeof a.outputs['loss']!.data).toBe('number');
    expect(b.outputs).toEqual(a.outputs);
    expect(c.outputs).toEqual(a.outputs);
    // an explicit --batch-size wins, and then 6 samples do not fit
    const r = run('run', 'examples/mlp.tg', '--inputs', at('all.npz'), '--batch-size', '4');
    expect(r.code).toBe(1);
    expect(r.err).toContain(`${at('all.npz')}:x: input 'x' is f32[4,16] but the file holds f32[6,16]`);
    expect(r.err).toContain("note: the model's inputs: x: f32[4,16], y: i32[4]");
  });

  test('-o writes an .npz and --output-dir one .npy per output, with the values --json prints', () => {
    const ref = json(run('run', 'examples/mlp.tg', '--inputs', at('all.npz'), '--json'));
    const r = run('run', 'examples/mlp.tg', '--inputs', at('all.npz'), '-o', at('out.npz'), '--output-dir', at('outdir'));
    expect(r.code).toBe(0);
    expect(r.out).toContain(`outputs logits f32[6,10], loss f32[] written to ${at('out.npz')} and ${at('outdir')}${path.sep}`);
    const npz = readNpz('out.npz', fs.readFileSync(at('out.npz')));
    expect([...npz.keys()]).toEqual(['logits', 'loss']);
    expect(fs.readdirSync(at('outdir')).sort()).toEqual(['logits.npy', 'loss.npy']);
    const logits = parseNpy(fs.readFileSync(path.join(at('outdir'), 'logits.npy')), 'logits.npy');
    expect(tensorsIdentical(logits, npz.get('logits')!.tensor)).toBe(true);
    expect(Array.from(logits.data)).toEqual((ref.outputs['logits']!.data as number[][]).flat());
    expect(parseNpy(fs.readFileSync(path.join(at('outdir'), 'loss.npy')), 'loss.npy').data[0]).toBe(ref.outputs['loss']!.data);
  });

  test('problems with the data are diagnostics naming the file; a missing file or unknown name is a command-line error', () => {
    fs.writeFileSync(at('bad.npy'), Buffer.from('\x93NUMPY\x01\x00\x10\x00{not a dict}   \n', 'latin1'));
    const bad = run('run', 'examples/mlp.tg', '--input', `x=${at('bad.npy')}`);
    expect(bad.code).toBe(1);
    expect(bad.err).toContain(`error: ${at('bad.npy')}: not a valid .npy header`);
    const missing = run('run', 'examples/mlp.tg', '--input', `x=${at('none.npy')}`);
    expect(missing.code).toBe(2);
    expect(missing.err).toContain(`no such file: ${at('none.npy')} (the input file)`);
    const unknown = run('run', 'examples/mlp.tg', '--input', `z=${at('x.npy')}`);
    expect(unknown.code).toBe(2);
    expect(unknown.err).toContain("the model has no input 'z' (inputs: x: f32[4,16], y: i32[4])");
    // float labels: the dtype is refused with the model's inputs listed
    fs.writeFileSync(at('yf.npy'), encodeNpy(Tensor.from('float32', [6], ys)));
    const floats = run('run', 'examples/mlp.tg', '--input', `x=${at('x.npy')}`, '--input', `y=${at('yf.npy')}`);
    expect(floats.code).toBe(1);
    expect(floats.err).toContain(`${at('yf.npy')}: input 'y' is i32[6] but the file holds float32 values`);
    expect(floats.err).toContain("the model's inputs: x: f32[6,16], y: i32[6]");
    // --input name=file.npz takes the array of that name
    expect(run('run', 'examples/mlp.tg', '--input', `x=${at('all.npz')}`, '--input', `y=${at('all.npz')}`).code).toBe(0);
    const notNpz = run('run', 'examples/mlp.tg', '-o', at('out.npy'));
    expect(notNpz.code).toBe(2);
    expect(notNpz.err).toContain('name the file .npz');
  });

  const HAVE_NUMPY = spawnSync('python3', ['-c', 'import numpy'], { encoding: 'utf8' }).status === 0;
  const numpyTest = HAVE_NUMPY ? test : test.skip;
  const py = (code: string, ...args: string[]) => {
    const r = spawnSync('python3', ['-c', code, ...args], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(r.stderr);
    return r.stdout;
  };

  numpyTest(`numpy writes an .npz (stored and compressed) that run reads${HAVE_NUMPY ? '' : ' (skipped: python3 with numpy is not installed)'}`, () => {
    py(
      `
import sys, numpy as np
x = np.arange(5 * 16, dtype=np.float64).reshape(5, 16) / 7
y = np.array([9, 8, 7, 6, 5], dtype=np.int64)
np.savez(sys.argv[1], x=x, y=y)
np.savez_compressed(sys.argv[2], x=np.asfortranarray(x.astype(np.float32)), y=y)
`,
      at('np.npz'),
      at('npc.npz'),
    );
    const a = json(run('run', 'examples/mlp.tg', '--inputs', at('np.npz'), '--json'));
    const b = json(run('run', 'examples/mlp.tg', '--inputs', at('npc.npz'), '--json'));
    expect(a.batch_size).toBe(5);
    expect(a.outputs['logits']!.shape).toEqual([5, 10]);
    expect(b.outputs).toEqual(a.outputs);
    fs.writeFileSync(at('xs.json'), JSON.stringify(Array.from({ length: 5 }, (_, r) => Array.from({ length: 16 }, (_, c) => (r * 16 + c) / 7))));
    fs.writeFileSync(at('ys.json'), '[9, 8, 7, 6, 5]');
    expect(json(run('run', 'examples/mlp.tg', '--input', `x=${at('xs.json')}`, '--input', `y=${at('ys.json')}`, '--json')).outputs).toEqual(a.outputs);
  });

  numpyTest(`run writes an .npz that numpy reads${HAVE_NUMPY ? '' : ' (skipped: python3 with numpy is not installed)'}`, () => {
    const ref = json(run('run', 'examples/mlp.tg', '--inputs', at('all.npz'), '--json'));
    expect(run('run', 'examples/mlp.tg', '--inputs', at('all.npz'), '-o', at('for-numpy.npz')).code).toBe(0);
    const got = JSON.parse(
      py(
        `
import sys, json, numpy as np
d = np.load(sys.argv[1])
print(json.dumps({k: {'dtype': str(d[k].dtype), 'shape': list(d[k].shape), 'data': d[k].tolist()} for k in d.files}))
`,
        at('for-numpy.npz'),
      ),
    );
    expect(got).toEqual(ref.outputs);
  });
});

describe('the compiled backend and exported executables', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tg-run-tgx-'));
  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));
  const x = Tensor.from('float32', [4, 16], Array.from({ length: 64 }, (_, i) => Math.cos(i)));
  const y = Tensor.from('int32', [4], [1, 0, 3, 9]);
  const inputs = path.join(tmp, 'in.npz');
  fs.writeFileSync(inputs, encodeNpz({ x, y }));
  const outputsOf = (...args: string[]) => {
    const r = run('run', ...args, '--inputs', inputs, '--json');
    expect(r.code).toBe(0);
    return (JSON.parse(r.out) as { outputs: Record<string, { dtype: string; shape: number[]; data: unknown }> }).outputs;
  };
  const close = (a: unknown, b: unknown) => {
    const fa = [a].flat(Infinity) as number[];
    const fb = [b].flat(Infinity) as number[];
    expect(fa.length).toBe(fb.length);
    fa.forEach((v, i) => expect(Math.abs(v - fb[i]!)).toBeLessThanOrEqual(1e-5 * Math.max(1, Math.abs(fb[i]!))));
  };

  test('both backends give the declared output shapes (a scalar loss is f32[])', () => {
    const ref = outputsOf('examples/mlp.tg');
    const ipu = outputsOf('examples/mlp.tg', '--backend', 'ipu');
    expect(ipu['loss']!.shape).toEqual([]);
    expect(Object.fromEntries(Object.entries(ipu).map(([k, v]) => [k, [v.dtype, v.shape]]))).toEqual(Object.fromEntries(Object.entries(ref).map(([k, v]) => [k, [v.dtype, v.shape]])));
    for (const k of Object.keys(ref)) close(ipu[k]!.data, ref[k]!.data);
  }, 900_000);

  test('run runs what compile -o wrote', () => {
    const exe = path.join(tmp, 'mlp.tgx');
    const c = run('compile', 'examples/mlp.tg', '--pipeline', 'inference', '-o', exe);
    expect(c.err).toBe('');
    expect(c.code).toBe(0);
    const ref = outputsOf('examples/mlp.tg');
    const got = outputsOf(exe);
    expect(got['loss']!.shape).toEqual([]);
    expect(got['logits']!.shape).toEqual([4, 10]);
    for (const k of Object.keys(ref)) close(got[k]!.data, ref[k]!.data);
    // its batch is fixed: other shapes are a diagnostic listing its inputs
    fs.writeFileSync(path.join(tmp, 'x6.npy'), encodeNpy(Tensor.zeros('float32', [6, 16])));
    const wrong = run('run', exe, '--input', `x=${path.join(tmp, 'x6.npy')}`);
    expect(wrong.code).toBe(1);
    expect(wrong.err).toContain("input 'x' is f32[4,16] but the file holds f32[6,16]");
    expect(run('run', exe, '--backend', 'reference').code).toBe(2);
  }, 900_000);
});
