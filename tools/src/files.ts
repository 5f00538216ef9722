import * as fs from 'node:fs';
import * as path from 'node:path';

/** Writes a file atomically: a temporary file in the same folder, then a rename, so readers never see half a file. */
export function writeAtomic(file: string, text: string): void {
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.tmp`);
  fs.writeFileSync(tmp, text);
  fs.renameSync(tmp, file);
}
