/**
 * Colour on a terminal, as command-line tools agree: NO_COLOR (any value) turns it off,
 * FORCE_COLOR turns it on (0 or false: off), otherwise only a terminal that is not `dumb` gets it.
 */
export function colourFor(stream: { isTTY?: boolean }, env: NodeJS.ProcessEnv = process.env): boolean {
  if (env['NO_COLOR'] !== undefined && env['NO_COLOR'] !== '') return false;
  const force = env['FORCE_COLOR'];
  if (force !== undefined) return !(force === '0' || force.toLowerCase() === 'false');
  return !!stream.isTTY && env['TERM'] !== 'dumb';
}

const SGR = { bold: '1', red: '31', green: '32', yellow: '33', magenta: '35', cyan: '36' } as const;

export type Style = keyof typeof SGR;

export function paint(text: string, styles: readonly Style[], on: boolean): string {
  return on && styles.length ? `\u001b[${styles.map((s) => SGR[s]).join(';')}m${text}\u001b[0m` : text;
}

/**
 * A rendered diagnostic with its severity in colour, its location in bold and the caret line in
 * green (the text itself is already free of control characters, see printable()).
 */
export function colourDiagnostic(text: string, on: boolean): string {
  if (!on) return text;
  return text
    .split('\n')
    .map((line) => {
      const head = /^((?:[^\s:][^:]*:\d+:\d+: )?)(error|warning|note)(:)(.*)$/.exec(line);
      if (head) {
        const sev = head[2]!;
        const colour: Style = sev === 'error' ? 'red' : sev === 'warning' ? 'magenta' : 'cyan';
        return `${paint(head[1]!, ['bold'], !!head[1])}${paint(sev + ':', ['bold', colour], true)}${paint(head[4]!, ['bold'], true)}`;
      }
      const note = /^(\s+)(note:)(.*)$/.exec(line);
      if (note) return `${note[1]}${paint(note[2]!, ['bold', 'cyan'], true)}${note[3]}`;
      if (/^\s*\|?\s*\^~*\s*$/.test(line)) return paint(line, ['green', 'bold'], true);
      return line;
    })
    .join('\n');
}
