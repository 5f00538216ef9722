import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { deviceIpus, generatePoplar } from '@tilegraph/codegen-poplar';
import type { DeviceChoice } from '@tilegraph/codegen-poplar';
import { Options, SyncPattern } from '@tilegraph/frontend';
import { opsModule } from './ops-fixture.js';
import { deviceChoiceFrom } from './backend.js';
import { buildExecutable, gclLibrary, popcTargets } from './build.js';
import { parseSdkVersion } from './toolchain.js';

/**
 * The build plan for the Poplar SDK, run against a fake SDK: a `popc` and a C++ compiler on PATH
 * that record their command lines and write the files asked for. The exact commands are checked
 * for each SDK release and device: the popc targets (cpu for the IPU Model, ipu2 and ipu21 on
 * SDK 3), the GCL library (-lgcl from 3.0, -lgcl_ct before).
 */

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tilegraph-sdk-plan-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** A fake tool: logs its arguments (one a line, then a blank line, in one write) and creates the file after -o. */
function fakeTool(file: string, log: string, version: string): void {
  fs.writeFileSync(
    file,
    [
      '#!/bin/sh',
      `if [ "$1" = "--version" ]; then echo "${version}"; exit 0; fi`,
      // one write per command: the build runs two at a time, and line-by-line writes interleave
      'rec="$(basename "$0")"; for a in "$@"; do rec="$rec',
      '$a"; done',
      `printf '%s\\n\\n' "$rec" >> "${log}"`,
      'out=""; prev=""',
      'for a in "$@"; do if [ "$prev" = "-o" ]; then out="$a"; fi; prev="$a"; done',
      'if [ -n "$out" ]; then echo fake > "$out"; chmod +x "$out"; fi',
      '',
    ].join('\n'),
    { mode: 0o755 },
  );
}

/** The commands a build ran, as argument lists with the build folder replaced by BUILD. */
function commands(log: string): string[][] {
  const text = fs.readFileSync(log, 'utf8').trim();
  return text.split('\n\n').map((block) => block.split('\n').map((a) => a.replace(/^.*\/\.build-[^/]+\//, 'BUILD/').replace(/^.*\/tilegraph-host-[^/]+\//, 'SUPPORT/')));
}

function buildWithFakeSdk(name: string, popcVersion: string, device?: DeviceChoice): string[][] {
  const dir = path.join(tmp, name);
  const bin = path.join(dir, 'bin');
  fs.mkdirSync(bin, { recursive: true });
  const log = path.join(dir, 'commands.log');
  fakeTool(path.join(bin, 'popc'), log, popcVersion);
  fakeTool(path.join(bin, 'fake-g++'), log, 'g++ (fake) 12.0');
  const saved = { PATH: process.env['PATH'], CXX: process.env['CXX'] };
  process.env['PATH'] = `${bin}${path.delimiter}${saved.PATH ?? ''}`;
  process.env['CXX'] = path.join(bin, 'fake-g++');
  try {
    const sources = generatePoplar(opsModule(), device ? { device } : {});
    const built = buildExecutable(sources, { toolchain: 'sdk', cacheDir: path.join(dir, 'cache'), showProgress: false, ...(device ? { device } : {}) });
    expect(built.toolchain).toBe('sdk');
    expect(built.args).toEqual([path.join(built.dir, 'codelets.gp')]);
  } finally {
    process.env['PATH'] = saved.PATH;
    if (saved.CXX === undefined) delete process.env['CXX'];
    else process.env['CXX'] = saved.CXX;
  }
  return commands(log);
}

// the host support library and the precompiled header of host.cpp's headers, built once (ar is not faked)
const SUPPORT_COMPILE = ['fake-g++', '-std=c++17', '-O2', '-c', 'BUILD/tilegraph_host.cpp', '-o', 'BUILD/tilegraph_host.o'];
const PCH_COMPILE = ['fake-g++', '-std=c++17', '-O0', '-x', 'c++-header', 'BUILD/pch/tilegraph_pch.hpp', '-o', 'BUILD/pch/tilegraph_pch.hpp.gch'];
const HOST_COMPILE = ['fake-g++', '-std=c++17', '-O0', '-I', 'SUPPORT/pch', '-include', 'tilegraph_pch.hpp', '-c', 'BUILD/host.cpp', '-o', 'BUILD/host.o'];
const link = (gcl: string) => ['fake-g++', 'BUILD/host.o', 'SUPPORT/lib/libtilegraph_host.a', '-o', 'BUILD/step', '-lpoplar', '-lpopops', '-lpoplin', '-lpopnn', '-lpoputil', '-lpoprand', gcl];
const popc = (targets: string) => ['popc', '-O3', '--target', targets, 'BUILD/codelets.cpp', '-o', 'BUILD/codelets.gp'];

describe('the SDK build plan', () => {
  test('SDK 3.x, IPU hardware: codelets for ipu2 and ipu21, linked with libgcl', () => {
    const cmds = buildWithFakeSdk('sdk33', 'POPLAR version 3.3.0 (de1f8de2a7) popc 3.3.0');
    expect(cmds).toHaveLength(5);
    expect(cmds.slice(0, 2)).toEqual(expect.arrayContaining([SUPPORT_COMPILE, PCH_COMPILE]));
    expect(cmds.slice(2, 4)).toEqual(expect.arrayContaining([popc('ipu2,ipu21'), HOST_COMPILE]));
    expect(cmds[4]).toEqual(link('-lgcl'));
  });

  test('SDK 2.x: codelets for ipu2 only, linked with libgcl_ct', () => {
    const cmds = buildWithFakeSdk('sdk26', 'POPLAR version 2.6.0 (9a0d2b2f3c) popc 2.6.0');
    expect(cmds).toEqual(expect.arrayContaining([popc('ipu2'), HOST_COMPILE]));
    expect(cmds[4]).toEqual(link('-lgcl_ct'));
  });

  test('the IPU Model runs codelets built for the host (cpu); the host program creates an IPUModel', () => {
    const cmds = buildWithFakeSdk('model', 'POPLAR version 3.4.0 (b4a1b7b5c2) popc 3.4.0', { kind: 'ipu-model' });
    expect(cmds).toEqual(expect.arrayContaining([popc('cpu')]));
    const host = generatePoplar(opsModule(), { device: { kind: 'ipu-model' } }).files['host.cpp']!;
    expect(host).toContain('constexpr unsigned kDeviceKind = kIpuModel;');
  });

  test('the device in the host program: offline targets, device ids, IPU counts rounded up', () => {
    const offline = generatePoplar(opsModule(), { device: { kind: 'offline', arch: 'ipu1' } }).files['host.cpp']!;
    expect(offline).toContain('constexpr unsigned kDeviceKind = kOffline;');
    expect(offline).toContain('constexpr const char *kIpuArch = "ipu1";');
    const byId = generatePoplar(opsModule(), { device: { kind: 'ipu', ipuId: 3 } }).files['host.cpp']!;
    expect(byId).toContain('constexpr int kIpuId = 3;');
    expect(popcTargets({ kind: 'offline', arch: 'ipu1' }, parseSdkVersion('POPLAR version 3.4.0'))).toEqual(['ipu1']);
    expect([3, 5, 6, 8].map((n) => deviceIpus(n, 1, { kind: 'ipu', autoRoundNumIpus: true }))).toEqual([4, 8, 8, 8]);
    expect(deviceIpus(3, 2, { kind: 'ipu' })).toBe(6);
  });

  test("Options.syncPattern reaches the device request as Poplar's syncConfiguration (as PopART sets it)", () => {
    const host = (o: Options) => generatePoplar(opsModule(), { device: deviceChoiceFrom(o) }).files['host.cpp']!;
    expect(host(new Options())).toContain('constexpr const char *kSyncConfiguration = "";');
    expect(host(new Options().syncPattern(SyncPattern.SinglePipeline))).toContain('constexpr const char *kSyncConfiguration = "ipuAndAll";');
    expect(host(new Options().syncPattern(SyncPattern.ReplicaAndLadder))).toContain('constexpr const char *kSyncConfiguration = "intraReplicaAndLadder";');
    // every way of asking for a device passes it: by id, any free device, an offline target
    const h = host(new Options().syncPattern(SyncPattern.SinglePipeline));
    expect(h).toContain('m.syncConfiguration = kSyncConfiguration;');
    const support = generatePoplar(opsModule()).files['tilegraph_host.cpp'];
    expect(support).toContain('manager.getDevice(unsigned(m.ipuId), deviceOptions(m))');
    expect(support).toContain('manager.getDevices(poplar::TargetType::IPU, m.deviceIpus, deviceOptions(m))');
    expect(support).toContain('poplar::Target::createIPUTarget(m.deviceIpus, m.ipuArch, deviceOptions(m))');
  });

  test('version lines and library names', () => {
    expect(parseSdkVersion('POPLAR version 3.4.0 (b4a1b7b5c2) popc 3.4.0')).toEqual({ major: 3, minor: 4, patch: 0 });
    expect(parseSdkVersion('popc: something else')).toBeUndefined();
    expect(gclLibrary(undefined)).toBe('-lgcl');
    expect(gclLibrary({ major: 2, minor: 6, patch: 0 })).toBe('-lgcl_ct');
  });
});
