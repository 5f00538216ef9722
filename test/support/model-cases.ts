import * as fs from 'node:fs';
import * as path from 'node:path';
import { STDLIB_DIR } from '@tilegraph/frontend';

/**
 * The `.tg` model files of a folder of cases (sorted names), and a `readFile` for the compiler
 * under which the cases' imports resolve inside that folder whatever the working directory.
 */
export function modelCases(dir: string): { cases: string[]; readFile: (p: string) => string | undefined } {
  const cases = fs.readdirSync(dir).filter((f) => f.endsWith('.tg')).sort();
  const readFile = (p: string): string | undefined => {
    const real = p.startsWith(STDLIB_DIR) ? p : path.join(dir, path.relative(process.cwd(), p));
    return fs.existsSync(real) ? fs.readFileSync(real, 'utf8') : undefined;
  };
  return { cases, readFile };
}
