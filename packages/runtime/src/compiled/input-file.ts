import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { randomBytes } from 'node:crypto';

/**
 * A file a run's inputs are written into, which the executable maps once ("inputs <path>"), so
 * that they cross no pipe: through the pipe they were copied twice, in chunks of its capacity,
 * each a wake-up of the writer thread (about 1 ms per 1.6 MB here). Runs of smaller inputs keep
 * the pipe. The file is in memory (/dev/shm) when there is one, and unlinked as soon as the
 * executable has mapped it, so nothing is left behind; a file that cannot be made or written
 * leaves the runs on the pipe.
 */
export class InputFile {
  /** Input bytes per run from which the file is worth its write. */
  static readonly MIN_BYTES = 64 * 1024;

  private constructor(
    private fd: number | undefined,
    readonly path: string,
  ) {}

  /**
   * A file of `bytes` for a new executable, or undefined when runs should keep the pipe (small
   * inputs, no folder whose path the protocol can carry, the file cannot be made).
   */
  static create(bytes: number): InputFile | undefined {
    if (bytes < InputFile.MIN_BYTES) return undefined;
    for (const dir of ['/dev/shm', os.tmpdir()]) {
      // the command line is split at spaces
      if (/\s/.test(dir)) continue;
      const file = path.join(dir, `tilegraph-inputs-${process.pid}-${randomBytes(6).toString('hex')}`);
      let fd: number | undefined;
      try {
        fd = fs.openSync(file, 'wx+', 0o600);
        fs.ftruncateSync(fd, bytes);
        return new InputFile(fd, file);
      } catch {
        if (fd !== undefined) InputFile.drop(fd, file);
      }
    }
    return undefined;
  }

  private static drop(fd: number, file: string): void {
    try {
      fs.closeSync(fd);
    } catch {
      // closed already
    }
    fs.rmSync(file, { force: true });
  }

  /** The executable has mapped the file (or refused it): the name is no longer needed. */
  unlink(): void {
    fs.rmSync(this.path, { force: true });
  }

  /** Writes the parts one after another from the start; false (and the file closed) if it cannot. */
  write(parts: readonly Uint8Array[]): boolean {
    if (this.fd === undefined) return false;
    try {
      let at = 0;
      for (const p of parts) {
        for (let done = 0; done < p.length; ) done += fs.writeSync(this.fd, p, done, p.length - done, at + done);
        at += p.length;
      }
      return true;
    } catch {
      this.close();
      return false;
    }
  }

  close(): void {
    if (this.fd === undefined) return;
    InputFile.drop(this.fd, this.path);
    this.fd = undefined;
  }
}
