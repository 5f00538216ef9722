import cliProgress from 'cli-progress';

/**
 * The one progress-bar style of tilegraph (builds, training): on stderr, only when stderr is a
 * terminal, erased when done. Elsewhere (a pipe, a log file, CI) nothing is drawn: the commands
 * print plain lines instead.
 */
export interface ProgressBar {
  /** Moves to `value` (of the total), with a label after the bar. */
  update(value: number, label?: string): void;
  /** Redraws (the elapsed time) without moving. */
  tick(): void;
  stop(): void;
}

const NONE: ProgressBar = { update: () => undefined, tick: () => undefined, stop: () => undefined };

/** A bar of `total` steps titled `title`, counting in `unit` (e.g. "jobs", "steps"). */
export function progressBar(title: string, total: number, unit: string, opts: { show?: boolean; start?: number; label?: string } = {}): ProgressBar {
  if (opts.show === false || !process.stderr.isTTY) return NONE;
  const bar = new cliProgress.SingleBar(
    {
      format: `${title.padEnd(9)} [{bar}] {percentage}% | {value}/{total} ${unit} | {duration_formatted} | {label}`,
      stream: process.stderr,
      // steps and builds may hold the event loop: draw on update, not from a timer
      synchronousUpdate: true,
      hideCursor: true,
      clearOnComplete: true,
      barsize: 30,
    },
    cliProgress.Presets.shades_classic,
  );
  let value = opts.start ?? 0;
  let label = opts.label ?? '';
  bar.start(total, value, { label });
  return {
    update(v, l) {
      value = v;
      if (l !== undefined) label = l;
      bar.update(value, { label });
    },
    tick() {
      bar.update(value, { label });
    },
    stop() {
      bar.stop();
    },
  };
}
