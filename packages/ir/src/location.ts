/**
 * Source locations. A location is a stack of frames, innermost first (the place an op was made,
 * then the call sites of the functions that made it), like a JavaScript or Python stack trace.
 */
export interface Frame {
  readonly file: string;
  /** 1-based; absent for locations that name a node rather than a line (ONNX). */
  readonly line?: number;
  readonly col?: number;
  /** A node or entity name inside the file (e.g. an ONNX node name). */
  readonly name?: string;
  /** The function this frame is in (model-language function or TypeScript function). */
  readonly fn?: string;
}

export interface Location {
  readonly frames: readonly Frame[];
}

export const UNKNOWN_LOC: Location = Object.freeze({ frames: Object.freeze([]) as readonly Frame[] });

export function fileLoc(file: string, line: number, col: number, fn?: string): Location {
  return { frames: [fn === undefined ? { file, line, col } : { file, line, col, fn }] };
}

/** `inner` made inside a call made at `outer`: the frames of inner, then those of outer. */
export function callLoc(inner: Location, outer: Location): Location {
  return { frames: [...inner.frames, ...outer.frames] };
}

/**
 * The frame a user should see: the first frame (innermost first) whose file contains none of the
 * exclude patterns — PopTorch's sourceLocationExcludes rule. When every frame is excluded, the
 * innermost frame is returned.
 */
export function selectFrame(loc: Location, excludes: readonly string[] = []): Frame | undefined {
  for (const f of loc.frames) {
    if (!excludes.some((p) => p !== '' && f.file.includes(p))) return f;
  }
  return loc.frames[0];
}

export function formatFrame(f: Frame): string {
  if (f.line !== undefined) return `${f.file}:${f.line}:${f.col ?? 1}`;
  if (f.name !== undefined) return `${f.file}:${f.name}`;
  return f.file;
}

/** "file:line:col" of the selected frame, or "<unknown>". */
export function formatLocation(loc: Location, excludes: readonly string[] = []): string {
  const f = selectFrame(loc, excludes);
  return f ? formatFrame(f) : '<unknown>';
}

export function locationsEqual(a: Location, b: Location): boolean {
  if (a.frames.length !== b.frames.length) return false;
  for (let i = 0; i < a.frames.length; i++) {
    const x = a.frames[i]!;
    const y = b.frames[i]!;
    if (x.file !== y.file || x.line !== y.line || x.col !== y.col || x.name !== y.name || x.fn !== y.fn) return false;
  }
  return true;
}
