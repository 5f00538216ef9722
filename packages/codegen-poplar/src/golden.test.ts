import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { generatePoplar } from './generate.js';
import { convModule, mlpModule } from './testing/golden-modules.js';

/**
 * Golden tests of the generated C++: the exact text for two small models. Run with
 * UPDATE_GOLDEN=1 to rewrite the files after an intended change (and review the diff).
 */

const GOLDEN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../test/golden/codegen');

function compareGolden(name: string, text: string): void {
  const file = path.join(GOLDEN, name);
  if (process.env['UPDATE_GOLDEN'] === '1') {
    fs.mkdirSync(GOLDEN, { recursive: true });
    fs.writeFileSync(file, text);
    return;
  }
  if (!fs.existsSync(file)) throw new Error(`missing golden file ${file}: run with UPDATE_GOLDEN=1`);
  expect(text).toBe(fs.readFileSync(file, 'utf8'));
}

describe('generated C++ (golden)', () => {
  for (const [name, make] of [
    ['mlp', mlpModule],
    ['conv', convModule],
  ] as const) {
    test(name, () => {
      const { files } = generatePoplar(make());
      compareGolden(`${name}.host.cpp`, files['host.cpp']);
      compareGolden(`${name}.codelets.cpp`, files['codelets.cpp']);
    });
  }

  test('generation is deterministic', () => {
    const a = generatePoplar(convModule()).files;
    const b = generatePoplar(convModule()).files;
    expect(a).toEqual(b);
  });
});
