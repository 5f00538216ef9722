import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * The suite's executable cache: XDG_CACHE_HOME points at a private folder of this user's under the
 * temporary folder (kept between runs, so later runs reuse the builds), never at the user's own
 * cache. Test workers and the CLI processes they start inherit it.
 */
export default function globalSetup() {
  const uid = typeof process.getuid === 'function' ? process.getuid() : undefined;
  let dir = path.join(os.tmpdir(), `tilegraph-test-cache-${uid ?? 'user'}`);
  try {
    fs.mkdirSync(dir, { mode: 0o700 });
  } catch (e) {
    if (e.code !== 'EEXIST') throw e;
  }
  const st = fs.lstatSync(dir);
  // someone else's folder (or a link) is not used: a fresh one instead
  if (!st.isDirectory() || (uid !== undefined && st.uid !== uid) || (st.mode & 0o077) !== 0) dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tilegraph-test-cache-'));
  process.env.XDG_CACHE_HOME = dir;
}
