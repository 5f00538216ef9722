// Builds the poplar-host emulation library and runs its C++ test programs
// (packages/runtime/poplar-host/tests/*.cpp), which are written like real
// Poplar user code and exit non-zero on a mismatch; also checks popc-reflect.
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HOST = fileURLToPath(new URL('../poplar-host/', import.meta.url));
const TESTS = path.join(HOST, 'tests');
const REFLECT = path.join(HOST, 'tools', 'popc-reflect.js');
// Kept between runs (build.sh only recompiles what changed), one folder per checkout: objects
// built from another checkout's sources must never be reused.
const WORK = path.join(os.tmpdir(), `tilegraph-poplar-host-tests-${os.userInfo().username}-${createHash('sha256').update(HOST).digest('hex').slice(0, 12)}`);
const CXX = process.env['CXX'] || 'g++';
const MINUTES = 60_000;

function run(cmd: string, args: string[], timeout = 10 * MINUTES): SpawnSyncReturns<string> {
  return spawnSync(cmd, args, { encoding: 'utf8', timeout, maxBuffer: 64 * 1024 * 1024 });
}

/** Runs a build step; a failure shows the command and its output. */
function mustRun(cmd: string, args: string[]): void {
  const r = run(cmd, args);
  if (r.status !== 0) {
    throw new Error(`${cmd} ${args.join(' ')}\nexit ${r.status} ${r.error?.message ?? ''}\n${r.stdout}\n${r.stderr}`);
  }
}

let library = '';

beforeAll(() => {
  fs.mkdirSync(WORK, { recursive: true });
  mustRun('bash', [path.join(HOST, 'build.sh'), path.join(WORK, 'lib')]);
  library = path.join(WORK, 'lib', 'libpoplar_host.a');
}, 15 * MINUTES);

const programs = fs
  .readdirSync(TESTS)
  .filter((f) => f.endsWith('.cpp'))
  .sort();

describe('poplar-host C++ test programs', () => {
  it('finds the test programs', () => {
    expect(programs).toEqual(
      expect.arrayContaining(['tutorial.cpp', 'poplibs.cpp', 'replication.cpp', 'errors.cpp', 'remote.cpp', 'ipu_threads.cpp', 'profile.cpp', 'kernels.cpp']),
    );
  });

  it.each(programs)('%s builds and passes', (file) => {
    const source = path.join(TESTS, file);
    const dir = path.join(WORK, file.replace(/\.cpp$/, ''));
    fs.mkdirSync(dir, { recursive: true });
    // A test names its codelets in a `// codelets: <path>` line.
    const codelets = [...fs.readFileSync(source, 'utf8').matchAll(/^\/\/ codelets: (.+)$/gm)].map((m) =>
      path.join(TESTS, m[1]!.trim()),
    );
    const inputs = [source];
    if (codelets.length > 0) {
      const registry = path.join(dir, 'codelets_registry.cpp');
      mustRun(process.execPath, [REFLECT, ...codelets, '-o', registry]);
      inputs.push(...codelets, registry);
    }
    const exe = path.join(dir, 'test');
    mustRun(CXX, ['-std=c++17', '-O1', '-Wall', '-I', path.join(HOST, 'include'), '-I', TESTS, ...inputs, library, '-lpthread', '-o', exe]);
    const r = run(exe, [], 5 * MINUTES);
    if (r.status !== 0) throw new Error(`${file} exited with ${r.status} ${r.signal ?? ''}\n${r.stdout}\n${r.stderr}`);
    expect(r.stdout).toMatch(/: \d+ passed, 0 failed/);
  }, 15 * MINUTES);
});

describe('popc-reflect', () => {
  const reflect = (source: string): { status: number | null; stderr: string; registry: string } => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'popc-reflect-'));
    try {
      fs.writeFileSync(path.join(dir, 'codelets.cpp'), source);
      const r = run(process.execPath, [REFLECT, path.join(dir, 'codelets.cpp'), '-o', path.join(dir, 'registry.cpp')], MINUTES);
      const out = path.join(dir, 'registry.cpp');
      return { status: r.status, stderr: r.stderr, registry: fs.existsSync(out) ? fs.readFileSync(out, 'utf8') : '' };
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  };

  it('registers vertices under the names the host uses', () => {
    const { status, registry } = reflect(fs.readFileSync(path.join(TESTS, 'codelets', 'tutorial.cpp'), 'utf8'));
    expect(status).toBe(0);
    for (const name of ['"SumVertex"', '"ScaleAdd<half>"', '"tg::util::Concat"', '"tg::Copy1<float>"', '"tg::Copy1<float,false>"', '"tg::Copy1<int,true>"']) {
      expect(registry).toContain(`(${name})`);
    }
    // a field-only base class and code inside #if 0 are not vertices
    expect(registry).not.toContain('"tg::UnaryBase"');
    expect(registry).not.toContain('NotCompiled');
    // a declared but undefined constructor: zero-filled storage instead
    expect(registry).toMatch(/using RegisteredVertex = AddConst;\n(?:(?!using )[^])*VertexType<RegisteredVertex, false>\("AddConst"\)/);
  });

  it('reads members through comments, attributes and odd layout', () => {
    const { status, registry } = reflect(
      [
        '#include <poplar/Vertex.hpp>',
        'namespace a::b { /* { not a brace */',
        'struct [[nodiscard]] V',
        '  : poplar::MultiVertex { // "}"',
        '  poplar::Input<poplar::Vector<float, poplar::VectorLayout::ONE_PTR>> x, y;',
        '  alignas(8) poplar::Output<float> z{};',
        '  float k = 1.0f, m;',
        '  static constexpr unsigned n = 2;',
        '  const char *label() const { return "{"; }',
        'private:',
        '  int hidden;',
        'public:',
        '  void compute(unsigned w) {}',
        '};',
        '}',
      ].join('\n'),
    );
    expect(status).toBe(0);
    expect(registry).toContain('("a::b::V")');
    const fields = [...registry.matchAll(/fieldSpec<decltype\(RegisteredVertex::(\w+)\)>\("(\w+)", offsetof\(RegisteredVertex, (\w+)\)\)/g)].map((m) => [m[1], m[2], m[3]]);
    expect(fields).toEqual(['x', 'y', 'z', 'k', 'm'].map((f) => [f, f, f]));
  });

  it('names the vertex class it cannot parse', () => {
    const { status, stderr } = reflect('namespace tg {\nclass Broken : public poplar::Vertex {\npublic:\n  poplar::Input<float> in;\n');
    expect(status).toBe(1);
    expect(stderr).toMatch(/cannot parse class 'tg::Broken'/);
  });

  it('warns about a template vertex without an explicit instantiation', () => {
    const { status, stderr, registry } = reflect(
      'template <class T> class W : public poplar::Vertex { public: poplar::Output<T> o; void compute() {} };\n',
    );
    expect(status).toBe(0);
    expect(stderr).toMatch(/template vertex 'W' has no explicit instantiation/);
    expect(registry).not.toContain('VertexType<');
  });
});
