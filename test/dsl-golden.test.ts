import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { compileModelSource } from '@tilegraph/frontend';
import { parseGraph, printGraph } from '@tilegraph/ir';
import { modelCases } from './support/model-cases.js';

/**
 * Model file → text IR: each `test/golden/NAME.tg` compiles to exactly `NAME.ir`. The first line
 * `# golden: debugInfo, excludes=a;b` chooses how the IR is printed (with locations, and only the
 * frame the excludes select). The printed IR must also read back and print identically.
 */

const here = path.dirname(fileURLToPath(import.meta.url));
const DIR = path.join(here, 'golden');
const { cases, readFile } = modelCases(DIR);

describe('model files to text IR (test/golden)', () => {
  test('there are cases', () => expect(cases.length).toBeGreaterThanOrEqual(3));
  for (const file of cases) {
    test(file, () => {
      const text = fs.readFileSync(path.join(DIR, file), 'utf8');
      const header = /^# golden:(.*)$/.exec(text.split('\n')[0] ?? '')?.[1] ?? '';
      const words = header.split(',').map((w) => w.trim());
      const excludes = words.find((w) => w.startsWith('excludes='))?.slice('excludes='.length).split(';');
      const opts = { debugInfo: words.includes('debugInfo'), ...(excludes ? { locationExcludes: excludes } : {}) };
      const printed = printGraph(compileModelSource(text, file, { readFile }), opts);
      const expected = fs.readFileSync(path.join(DIR, file.replace(/\.tg$/, '.ir')), 'utf8');
      expect(printed).toBe(expected);
      expect(printGraph(parseGraph(printed, file), opts)).toBe(printed);
    });
  }
});
