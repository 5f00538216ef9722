import { DiagnosticError, error } from '@tilegraph/ir';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The tools that turn generated sources into an executable: the Poplar SDK (popc on PATH) or
 * the bundled emulation (g++ and packages/runtime/poplar-host).
 */
export type Toolchain =
  | {
      readonly kind: 'sdk';
      readonly popc: string;
      readonly cxx: string;
      /** popc's and the compiler's version lines (the cache key). */
      readonly version: string;
      /** The Poplar SDK release popc reports, when it can be read. */
      readonly sdk?: SdkVersion;
    }
  | {
      readonly kind: 'emulation';
      readonly cxx: string;
      /** packages/runtime/poplar-host */
      readonly poplarHost: string;
      /** Hash of the poplar-host sources and the compiler version. */
      readonly version: string;
      /** How the executable is linked: with gold when it is installed (it links a program in half the time of the default ld). */
      readonly linkFlags?: readonly string[];
    };

export interface SdkVersion {
  readonly major: number;
  readonly minor: number;
  readonly patch: number;
}

/** The SDK release in popc's version line ("POPLAR version 3.3.0 (...)"), if it names one. */
export function parseSdkVersion(line: string): SdkVersion | undefined {
  const m = /version\s+(\d+)\.(\d+)(?:\.(\d+))?/i.exec(line);
  return m ? { major: Number(m[1]), minor: Number(m[2]), patch: Number(m[3] ?? 0) } : undefined;
}

/** The executable `name` on PATH, if any. */
export function findOnPath(name: string): string | undefined {
  for (const dir of (process.env['PATH'] ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const p = path.join(dir, name);
    try {
      fs.accessSync(p, fs.constants.X_OK);
      if (fs.statSync(p).isFile()) return p;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** The first line a tool prints (its version), or '' when it cannot be run. */
export function firstLine(cmd: string, args: string[]): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 30_000 });
  return `${r.stdout ?? ''}${r.stderr ?? ''}`.split('\n')[0]!.trim();
}

/** packages/runtime/poplar-host, next to this package's src/ and dist/. */
export function poplarHostDir(): string {
  return fileURLToPath(new URL('../../poplar-host/', import.meta.url));
}

/** sha256 of every file under the given directories (paths and contents), in a stable order. */
export function hashTree(dirs: readonly string[]): string {
  const h = createHash('sha256');
  const walk = (d: string): void => {
    if (!fs.existsSync(d)) return;
    for (const e of fs.readdirSync(d, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile()) {
        h.update(p.slice(d.length));
        h.update('\0');
        h.update(fs.readFileSync(p));
        h.update('\0');
      }
    }
  };
  for (const d of dirs) {
    h.update(`dir:${path.basename(d)}\0`);
    walk(d);
  }
  return h.digest('hex');
}

let cached: Toolchain | undefined;

/**
 * Picks the toolchain: `popc` on PATH means the SDK, otherwise the emulation. `prefer` forces
 * one (an error names what is missing).
 */
export function findToolchain(prefer: 'auto' | 'sdk' | 'emulation' = 'auto'): Toolchain {
  if (prefer === 'auto' && cached) return cached;
  const cxx = process.env['CXX'] || findOnPath('g++') || findOnPath('c++');
  if (!cxx) throw new DiagnosticError(error('no C++ compiler found', undefined, ['install g++ (apt-get install g++) or set CXX']));
  const popc = prefer === 'emulation' ? undefined : findOnPath('popc');
  let t: Toolchain;
  if (popc) {
    const popcVersion = firstLine(popc, ['--version']);
    const sdk = parseSdkVersion(popcVersion);
    t = { kind: 'sdk', popc, cxx, version: `${popcVersion} | ${firstLine(cxx, ['--version'])}`, ...(sdk ? { sdk } : {}) };
  } else {
    if (prefer === 'sdk') throw new DiagnosticError(error('the Poplar SDK was requested but popc is not on PATH', undefined, ['source the SDK enable script']));
    const poplarHost = poplarHostDir();
    if (!fs.existsSync(path.join(poplarHost, 'include', 'poplar', 'Graph.hpp'))) {
      throw new DiagnosticError(error(`the Poplar emulation is missing (${poplarHost})`, undefined, ['reinstall tilegraph']));
    }
    const version = createHash('sha256')
      .update(hashTree([path.join(poplarHost, 'include'), path.join(poplarHost, 'src'), path.join(poplarHost, 'tools')]))
      .update(firstLine(cxx, ['--version']))
      .digest('hex');
    t = { kind: 'emulation', cxx, poplarHost, version, ...(findOnPath('ld.gold') ? { linkFlags: ['-fuse-ld=gold'] } : {}) };
  }
  if (prefer === 'auto') cached = t;
  return t;
}
