import { cppFile } from './codelets.js';

/**
 * Fixed parts of host.cpp, whose C++ lives in ../cpp/host_*.hpp: includes, helpers used by the
 * generated graph functions, and the stdin/stdout protocol the runtime speaks with the executable (see codegen-design: "The host
 * program protocol"). The Precision options that set the tiles' floating-point behaviour add a
 * few lines (HostNumerics); without them the text is fixed.
 */

/** The Precision options the host program sets on the tiles (PopART does the same calls). */
export interface HostNumerics {
  /** Precision.enableStochasticRounding: seeded from the run seed, continued across runs. */
  readonly stochasticRounding: boolean;
  /** Precision.enableFloatingPointExceptions: traps on invalid operations, division by zero and overflow. */
  readonly floatingPointExceptions: boolean;
}

const NO_NUMERICS: HostNumerics = { stochasticRounding: false, floatingPointExceptions: false };

// the file's first line is its description, not part of the program
export const HOST_INCLUDES = cppFile('host_includes.hpp').replace(/^\/\/.*\n/, '').trimEnd();

export function hostIncludes(n: HostNumerics = NO_NUMERICS): string {
  const extra: string[] = [];
  if (n.floatingPointExceptions || n.stochasticRounding) extra.push('#include <poplar/CSRFunctions.hpp>');
  if (n.stochasticRounding) extra.push('#include <poprand/RandomGen.hpp>', '#include <poprand/codelets.hpp>');
  if (!extra.length) return HOST_INCLUDES;
  return HOST_INCLUDES.replace('#include <poplar/DeviceManager.hpp>\n', `${extra.join('\n')}\n#include <poplar/DeviceManager.hpp>\n`);
}

const HOST_HELPERS_TEMPLATE = cppFile('host_support.hpp') + cppFile('host_protocol.hpp').trimEnd();

// serve() with a seed program: program 1 seeds the tiles' generators from the run seed before
// the first run after the seed is written; later runs continue their sequences.
const RESEED: Record<string, string> = {
  '/*RESEED_STATE*/': '\n  bool reseed = true;  // run program 1 (seeding stochastic rounding) before the next run',
  '/*RESEED_ON_WRITE*/': '\n      if (w[1] == "seed") reseed = true;',
  '/*RESEED_ON_RUN*/': '\n      if (reseed) {\n        engine.run(1);\n        reseed = false;\n      }',
};

export function hostHelpers(n: HostNumerics = NO_NUMERICS): string {
  let out = HOST_HELPERS_TEMPLATE;
  for (const [mark, text] of Object.entries(RESEED)) out = out.replace(mark, n.stochasticRounding ? text : '');
  return out;
}

export const HOST_HELPERS = hostHelpers();

const HOST_MAIN_TEMPLATE = cppFile('host_main.hpp').trimEnd();

/** main(): the plain program, or with the Precision options' calls in front (and a seed program), put where host_main.hpp marks NUMERICS. */
export function hostMain(n: HostNumerics = NO_NUMERICS): string {
  const codelets = n.stochasticRounding ? '\n    poprand::addCodelets(graph);' : '';
  const lines: string[] = [];
  if (!n.stochasticRounding && !n.floatingPointExceptions) {
    lines.push('    poplar::program::Sequence program = buildProgram(d);', '    poplar::Engine engine(graph, {program});');
  } else {
    lines.push('    // the Precision options, set on every tile at the start of each run', '    poplar::program::Sequence program;');
    if (n.floatingPointExceptions) {
      lines.push('    poplar::setFloatingPointBehaviour(graph, program, poplar::FloatingPointBehaviour(true, true, true, false, true), "floating-point exceptions");');
    }
    if (n.stochasticRounding) lines.push('    poplar::setStochasticRounding(graph, program, true, "stochastic rounding");');
    lines.push('    program.add(buildProgram(d));');
    if (n.stochasticRounding) {
      lines.push(
        '    // program 1 seeds the generators stochastic rounding draws from with the run seed',
        '    poplar::program::Sequence seedProgram;',
        '    poprand::setSeed(graph, poplar::concat(d.seed.reshape({1}), d.step.reshape({1})), 0, seedProgram, "stochastic rounding seed");',
        '    poplar::Engine engine(graph, {program, seedProgram});',
      );
    } else {
      lines.push('    poplar::Engine engine(graph, {program});');
    }
  }
  return HOST_MAIN_TEMPLATE.replace('/*NUMERICS_CODELETS*/', codelets).replace('/*NUMERICS_PROGRAM*/', lines.join('\n'));
}

export const HOST_MAIN = hostMain();

/** The helper of pipeline stashes (emitted only for modules that stash). */
export const RING_HELPER = cppFile('host_ring.hpp').trimEnd();
