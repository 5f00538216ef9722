import { cppFile } from './codelets.js';

/**
 * Fixed parts of host.cpp. The C++ every host program needs (the device state, tensor helpers,
 * attaching the device, and the stdin/stdout protocol the runtime speaks with the executable; see
 * codegen-design: "The host program protocol") is the host support library,
 * ../cpp/tilegraph_host.hpp and tilegraph_host.cpp: written beside each host.cpp, built once per
 * toolchain and linked in. A generated program describes itself to it in main() (a
 * tilegraph::Module) and hands over.
 */

/** The Precision options the host program sets on the tiles (PopART does the same calls). */
export interface HostNumerics {
  /** Precision.enableStochasticRounding: seeded from the run seed, continued across runs. */
  readonly stochasticRounding: boolean;
  /** Precision.enableFloatingPointExceptions: traps on invalid operations, division by zero and overflow. */
  readonly floatingPointExceptions: boolean;
}

// the file's first line is its description, not part of the program
export const HOST_INCLUDES = `${cppFile('host_includes.hpp').replace(/^\/\/.*\n/, '').trimEnd()}\n\n#include "tilegraph_host.hpp"`;

/** The translation unit of a program's outlined layers (built beside host.cpp, which declares them). */
export const OUTLINED_FILE = 'host_layers.cpp';

/** The translation unit of the largest graph's builder, when it is large (built beside host.cpp, which declares it). */
export const GRAPH_FILE = 'host_graph.cpp';

/** Every file name generated sources may hold (an --emit-cpp folder of only these may be written again). */
export const GENERATED_FILES = ['codelets.cpp', 'host.cpp', OUTLINED_FILE, GRAPH_FILE, 'tilegraph_host.hpp', 'tilegraph_host.cpp', 'plan.json'] as const;

/**
 * The host program's translation units among generated files, in build order: host.cpp,
 * host_graph.cpp with a large graph, host_layers.cpp with outlined layers. Each compiles on its
 * own and all are linked.
 */
export function hostUnits(files: { readonly [name: string]: string | undefined }): ('host.cpp' | typeof GRAPH_FILE | typeof OUTLINED_FILE)[] {
  return (['host.cpp', GRAPH_FILE, OUTLINED_FILE] as const).filter((f) => files[f] !== undefined);
}

/** The host support library's sources, by file name. */
export const HOST_SUPPORT_FILES = {
  'tilegraph_host.hpp': cppFile('tilegraph_host.hpp'),
  'tilegraph_host.cpp': cppFile('tilegraph_host.cpp'),
} as const;

/** main(): the module's description for the support library, which does the rest. */
export function hostMain(n: HostNumerics, has: { readonly hostFunctions: boolean; readonly ioTiles: boolean }): string {
  return [
    '// main(): the module described to the host support library, which attaches the device, builds',
    '// the graph, loads the engine and serves the protocol.',
    'int main(int argc, char **argv) {',
    '  tilegraph::Module m;',
    '  m.replicas = kReplicas;',
    '  m.ipus = kIpus;',
    ...(has.ioTiles ? ['  m.ioTiles = kIoTiles;'] : []),
    '  m.deviceKind = kDeviceKind;',
    '  m.deviceIpus = kDeviceIpus;',
    '  m.ipuArch = kIpuArch;',
    '  m.ipuId = kIpuId;',
    '  m.syncConfiguration = kSyncConfiguration;',
    '  m.inputBytes = kInputBytes;',
    '  m.outputBytes = kOutputBytes;',
    ...(has.hostFunctions ? ['  m.hostFunctions = kHostFunctions;'] : []),
    `  m.floatingPointExceptions = ${n.floatingPointExceptions};`,
    `  m.stochasticRounding = ${n.stochasticRounding};`,
    '  m.declare = declare;',
    '  m.buildProgram = buildProgram;',
    '  return tilegraph::hostMain(argc, argv, m);',
    '}',
  ].join('\n');
}
