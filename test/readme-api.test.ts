import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import * as frontend from '@tilegraph/frontend';
import * as passes from '@tilegraph/passes';
import * as runtime from '@tilegraph/runtime';
import { Tensor } from '@tilegraph/ir';
import { ROOT } from './support/cli.js';
import { trainingModel } from './support/reference.js';

/**
 * The TypeScript example of the README, executed as written there: its imports are bound to the
 * packages, with trainingModel on the reference interpreter (the compiled path has tests of its own).
 */

/** The first ```ts block after "The same from TypeScript". */
function readmeExample(): string {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const from = readme.indexOf('The same from TypeScript');
  expect(from).toBeGreaterThan(0);
  const m = /```ts\n([^]*?)```/.exec(readme.slice(from));
  expect(m).not.toBeNull();
  return m![1]!;
}

/** Runs the example with `import { a, b } from 'pkg'` bound to `modules[pkg]`; returns its top-level names. */
async function execute(source: string, modules: Record<string, object>, names: readonly string[]): Promise<Record<string, unknown>> {
  const js = ts.transpileModule(source, { compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext } }).outputText;
  const body = js.replace(/^import \{([^}]*)\} from '([^']+)';$/gm, (_, what: string, pkg: string) => {
    if (!(pkg in modules)) throw new Error(`the example imports ${pkg}`);
    return `const {${what}} = __modules[${JSON.stringify(pkg)}];`;
  });
  expect(body).not.toMatch(/^\s*import /m);
  const AsyncFunction = Object.getPrototypeOf(async () => undefined).constructor as new (...args: string[]) => (m: object) => Promise<Record<string, unknown>>;
  return new AsyncFunction('__modules', `${body}\nreturn { ${names.join(', ')} };`)(modules);
}

describe('README TypeScript example', () => {
  it('builds its inputs, trains, reads the weights back and disposes of the model', async () => {
    const r = await execute(readmeExample(), { '@tilegraph/frontend': frontend, '@tilegraph/passes': passes, '@tilegraph/runtime': { ...runtime, trainingModel } }, ['model', 'loss', 'weights']);
    const loss = r['loss'] as Tensor;
    // Final output mode (the training default): the last micro-batch's loss, a scalar as declared
    expect(loss.shape).toEqual([]);
    expect(Number.isFinite(loss.data[0])).toBe(true);
    const weights = r['weights'] as Record<string, Tensor>;
    expect(Object.keys(weights).sort()).toEqual(['fc1.bias', 'fc1.weight', 'fc2.bias', 'fc2.weight']);
    expect(weights['fc1.weight']!.shape).toEqual([32, 16]);
    expect((r['model'] as runtime.TrainingModel).isDisposed).toBe(true);
  });
});
