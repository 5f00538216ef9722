/**
 * A long computation written as a generator that yields where it may pause (between passes,
 * between graphs), so that an asynchronous caller can let the event loop run in between while a
 * synchronous caller runs it straight through with runToEnd. Both share every line of the work.
 */
export type Pausable<T> = Generator<void, T, void>;

/** Runs a pausable computation to its end without pausing. */
export function runToEnd<T>(work: Pausable<T>): T {
  for (;;) {
    const r = work.next();
    if (r.done) return r.value;
  }
}
