import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DslError, STDLIB_DIR, compileModelSource } from '@tilegraph/frontend';
import { modelCases } from './support/model-cases.js';

/**
 * Each `test/errors/NAME.tg` is a model with mistakes; `NAME.expected` holds exactly the
 * diagnostics the compiler must print for it (default location excludes: the standard library).
 * A first line `# excludes: a, b` (or `# excludes: none`) sets the location excludes instead.
 * In the expected text, `<dir>` stands for this folder and `<stdlib>` for the standard library
 * folder, so that absolute paths do not leak into the files.
 */

const here = path.dirname(fileURLToPath(import.meta.url));
const DIR = path.join(here, 'errors');
const { cases, readFile } = modelCases(DIR);

describe('model-language diagnostics (test/errors)', () => {
  test('there are cases', () => expect(cases.length).toBeGreaterThanOrEqual(8));
  for (const file of cases) {
    test(file, () => {
      const text = fs.readFileSync(path.join(DIR, file), 'utf8');
      const expected = fs.readFileSync(path.join(DIR, file.replace(/\.tg$/, '.expected')), 'utf8').trimEnd();
      let got: string | undefined;
      try {
        const header = /^# excludes:(.*)$/m.exec(text.split('\n')[0] ?? '');
        const excludes = header ? header[1]!.split(',').map((x) => x.trim()).filter((x) => x !== '' && x !== 'none') : undefined;
        compileModelSource(text, file, excludes ? { readFile, excludes } : { readFile });
      } catch (e) {
        if (!(e instanceof DslError)) throw e;
        got = e.message;
      }
      const normalised = got
        ?.split(STDLIB_DIR.replace(/\/$/, '')).join('<stdlib>')
        .split(path.resolve(process.cwd())).join('<dir>');
      expect(normalised).toBe(expected);
    });
  }
});
