import { EngineProfile, LatencyStats, ProfileFolder, computeLatency, hostIpuLatency, ipuHostLatency, latency, perfCounterLists, readProfileFolder } from '@tilegraph/runtime';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { UsageError } from '../diagnostics.js';
import { checkInputFile } from '../files.js';

/**
 * The Profile tab of the HTML report (`tilegraph report MODEL --profile DIR --html FILE`): what a
 * profiled model measured on the emulated engine (profile.json) beside the estimates — the
 * engine's, from the compiler's vertex cycle estimates, and the compiler's own cost model
 * (compile.json). Built here as tables of text and written into the page as markup (every text
 * escaped), like the Benchmarks tab: it needs no script.
 */

export interface ProfileTable {
  readonly title: string;
  readonly caption: string;
  readonly head: readonly string[];
  /** Right-aligned columns. */
  readonly numeric: readonly boolean[];
  readonly rows: readonly (readonly string[])[];
  /** Indentation of each row's first cell (the program steps' depth). */
  readonly depth?: readonly number[];
}

export interface ProfileSection {
  readonly dir: string;
  readonly facts: readonly (readonly [string, string])[];
  /** Figures of the last run, as cards: label, value, detail. */
  readonly cards: readonly (readonly [string, string, string])[];
  /** What to keep in mind reading the figures (a different model, runs not listed, ...). */
  readonly notes: readonly string[];
  readonly tables: readonly ProfileTable[];
  /** Measured bytes of every tile of each IPU (one replica), for the heat maps. */
  readonly tiles: readonly { readonly ipu: number; readonly bytes: readonly number[]; readonly bytesPerTile: number }[];
}

/** Most rows a table shows (a large model has thousands of steps); the rest are counted in a note. */
const MAX_ROWS = 400;

// ----------------------------------------------------------------------------------------------
// Numbers

/** Seconds with three significant figures in the fitting unit: "3.00 ms", "13.9 µs", "186 µs". */
export function formatSeconds(s: number): string {
  if (s === 0) return '0';
  const a = Math.abs(s);
  const [v, unit] = a >= 1 ? [s, 's'] : a >= 1e-3 ? [s * 1e3, 'ms'] : a >= 1e-6 ? [s * 1e6, 'µs'] : [s * 1e9, 'ns'];
  const r = Math.abs(v);
  return `${v.toFixed(r >= 99.95 || unit === 'ns' ? 0 : r >= 9.995 ? 1 : 2)} ${unit}`;
}

export function formatCount(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

function formatBytes(n: number): string {
  if (n >= 2 ** 30) return `${(n / 2 ** 30).toFixed(2)} GiB`;
  if (n >= 2 ** 20) return `${(n / 2 ** 20).toFixed(1)} MiB`;
  if (n >= 2 ** 10) return `${(n / 2 ** 10).toFixed(1)} KiB`;
  return `${n} bytes`;
}

/** measured / estimated, "—" without an estimate. */
function ratio(measured: number, estimated: number): string {
  return estimated > 0 ? `${(measured / estimated).toFixed(measured / estimated >= 10 ? 0 : 2)}×` : '—';
}

function latencyText(l: LatencyStats): string {
  return `${formatSeconds(l[2])} (${formatSeconds(l[0])} – ${formatSeconds(l[1])})`;
}

// ----------------------------------------------------------------------------------------------
// The section

/** Each compute set's name; compute sets sharing one (one per op of a kind) get their id too. */
function computeSetLabels(e: EngineProfile): Map<number, string> {
  const uses = new Map<string, number>();
  for (const cs of e.computeSets) uses.set(cs.name, (uses.get(cs.name) ?? 0) + 1);
  return new Map(e.computeSets.map((cs) => [cs.id, !cs.name ? `compute set ${cs.id}` : uses.get(cs.name)! > 1 ? `${cs.name} #${cs.id}` : cs.name]));
}

/** The compute sets: every execution of the runs, slowest first. */
function computeSetTable(e: EngineProfile, clockHz: number): ProfileTable {
  const ex = e.execution!;
  const byId = new Map(e.computeSets.map((c) => [c.id, c]));
  const label = computeSetLabels(e);
  const rows = [...ex.totals.computeSets]
    .sort((a, b) => b.seconds - a.seconds)
    .map((c) => {
      const cs = byId.get(c.id)!;
      const perExec = c.seconds / Math.max(1, c.executions);
      const estimated = cs.estimatedCycles / clockHz;
      return [label.get(cs.id)!, formatCount(c.executions), formatSeconds(c.seconds), formatSeconds(perExec), formatCount(cs.estimatedCycles), formatSeconds(estimated), ratio(perExec, estimated), `${cs.vertices} on ${cs.tiles} tile${cs.tiles === 1 ? '' : 's'}${cs.unestimatedVertices ? `, ${cs.unestimatedVertices} without an estimate` : ''}`];
    });
  return {
    title: 'Compute sets',
    caption: `Every run so far (${formatCount(ex.runs)}), replica 0, slowest first. Estimated cycles of one execution: the slowest tile's vertex cycle estimates (the compiler's, set with setPerfEstimate) plus a sync; the estimated time is at ${(clockHz / 1e9).toFixed(2)} GHz. The emulation runs on the CPU: the ratio says how much slower than the estimated IPU it computed, not how fast an IPU would be.`,
    head: ['compute set', 'executions', 'measured', 'per execution', 'estimated cycles', 'estimated time', 'measured / estimated', 'vertices'],
    numeric: [false, true, true, true, true, true, true, false],
    rows,
  };
}

/** The program steps as a tree, depth first from each program's root; a step reached again (a shared sequence) is shown once. */
function stepTable(e: EngineProfile, clockHz: number): { table: ProfileTable; hidden: number } {
  const ex = e.execution!;
  const counts = new Map(ex.totals.steps.map((s) => [s.id, s]));
  const rows: string[][] = [];
  const depth: number[] = [];
  const shown = new Set<number>();
  const label = computeSetLabels(e);
  let hidden = 0;
  const visit = (id: number, d: number): void => {
    const s = e.steps[id]!;
    const c = counts.get(id);
    if (rows.length >= MAX_ROWS) {
      hidden++;
      return;
    }
    const again = shown.has(id);
    shown.add(id);
    const est = s.estimatedCycles !== undefined && c ? s.estimatedCycles * c.executions : undefined;
    const name = s.computeSet !== undefined ? label.get(s.computeSet) ?? s.name : s.name;
    rows.push([
      name ? `${s.kind} ${name}` : s.kind,
      c ? formatCount(c.executions) : '0',
      c ? formatSeconds(c.seconds) : '—',
      est !== undefined ? formatCount(est) : '',
      est !== undefined ? formatSeconds(est / clockHz) : '',
      est !== undefined && c ? ratio(c.seconds, est / clockHz) : '',
      again ? 'shown above' : '',
    ]);
    depth.push(d);
    if (!again) for (const k of s.children ?? []) visit(k, d + 1);
  };
  e.programs.forEach((root) => visit(root, 0));
  return {
    table: {
      title: 'Program steps',
      caption: 'The control program as the engine ran it, every run so far, replica 0: each step\'s executions and wall time (a sequence or loop includes its children). Estimated cycles: execute steps from their compute set\'s estimate, PopLibs steps (run on the host by the emulation) from their tensors\' sizes and FLOPs by the compiler\'s GC200 model.',
      head: ['step', 'executions', 'measured', 'estimated cycles', 'estimated time', 'measured / estimated', ''],
      numeric: [false, true, true, true, true, true, false],
      rows,
      depth,
    },
    hidden,
  };
}

function memoryTable(f: ProfileFolder): ProfileTable {
  const e = f.engine;
  const T = e.target.tilesPerIpu;
  const planned = new Map((f.compile.memory?.perIpu ?? []).map((p) => [p.ipu, p]));
  const rows = Array.from({ length: e.target.ipus }, (_, ipu) => {
    const tiles = e.memory.tiles.slice(ipu * T, (ipu + 1) * T);
    const always = e.memory.alwaysLive.slice(ipu * T, (ipu + 1) * T);
    let max = 0;
    let at = 0;
    tiles.forEach((b, t) => {
      if (b > max) {
        max = b;
        at = t;
      }
    });
    const p = planned.get(ipu);
    return [
      String(ipu),
      formatBytes(tiles.reduce((a, b) => a + b, 0)),
      formatBytes(always.reduce((a, b) => a + b, 0)),
      String(tiles.filter((b) => b > 0).length),
      `tile ${at}: ${formatCount(max)} bytes`,
      `${((100 * max) / e.target.bytesPerTile).toFixed(1)}%`,
      p ? `tile ${p.maxTile - ipu * T}: ${formatCount(p.maxTileBytes)} bytes` : '—',
    ];
  });
  return {
    title: 'Memory per tile',
    caption: `As the emulated engine accounts it when it loads (one replica): tensors by liveness and vertex state, against ${formatCount(e.target.bytesPerTile)} bytes a tile. The compiler's plan (compile.json) is beside it; the two account differently (see poplar-host's README), so they are close, not equal.`,
    head: ['IPU', 'on its tiles', 'always live', 'tiles used', 'fullest tile', 'of a tile', 'plan: fullest tile'],
    numeric: [true, true, true, true, true, true, true],
    rows,
  };
}

/** The Profile tab's content from a profile folder read with readProfileFolder. */
export function profileSection(f: ProfileFolder, reportModel: string): ProfileSection {
  const e = f.engine;
  const c = f.compile;
  const clockHz = e.target.clockHz;
  const notes: string[] = [];
  if (c.model !== reportModel) notes.push(`The profile is of model '${c.model}' and the report of '${reportModel}': the other tabs describe the report's build, this one the profiled model.`);
  const facts: [string, string][] = [
    ['folder', f.dir],
    ['model', `${c.model}, ${c.kind}; model name '${c.modelName}'`],
    ['compiled', `${c.createdAt} for the ${c.backend} backend`],
    ['target', `${e.target.ipus} IPU${e.target.ipus > 1 ? 's' : ''} × ${formatCount(e.target.tilesPerIpu)} tiles, ${e.target.replicas} replica${e.target.replicas > 1 ? 's' : ''}, ${(clockHz / 1e9).toFixed(2)} GHz`],
    ['options', `deviceIterations ${c.options.deviceIterations}, replicationFactor ${c.options.replicationFactor}, gradientAccumulation ${c.options.gradientAccumulation}`],
    ['compile', `passes ${formatSeconds(c.seconds.passes)}, code generation, build and start ${formatSeconds(c.seconds.start)}`],
  ];
  const tables: ProfileTable[] = [];
  const cards: [string, string, string][] = [];
  const ex = e.execution;
  if (!ex) {
    notes.push('The engine described the graph only (autoReport.outputGraphProfile): no run was measured. Set autoReport.all or autoReport.outputExecutionProfile to "true" to measure runs.');
  } else if (!ex.lastRun) {
    notes.push('The model was compiled but not run: there are no measurements yet.');
  } else {
    const last = ex.lastRun;
    const names = new Map(c.streams.map((s) => [s.handle, s.name]));
    facts.push(['runs', `${formatCount(ex.runs)}, ${formatSeconds(ex.seconds)} in all`]);
    cards.push(['last run, measured', formatSeconds(last.seconds), `run ${last.run}, replica 0, on the CPU`]);
    cards.push(['estimated', `${formatCount(last.estimatedCycles)} cycles`, `${formatSeconds(last.estimatedCycles / clockHz)} at ${(clockHz / 1e9).toFixed(2)} GHz (the engine's estimates)`]);
    cards.push(["compiler's estimate", `${formatCount(c.estimate.cyclesPerRun)} cycles`, `${formatSeconds(c.estimate.cyclesPerRun / c.estimate.clockHz)} a run (cost model, compile.json)`]);
    cards.push(['host → IPU', formatBytes(last.hostToDevice.bytes), `${formatCount(last.hostToDevice.copies)} copies, ${formatSeconds(last.hostToDevice.seconds)}`]);
    cards.push(['IPU → host', formatBytes(last.deviceToHost.bytes), `${formatCount(last.deviceToHost.copies)} copies, ${formatSeconds(last.deviceToHost.seconds)}`]);
    const p = perfCounterLists(last.perfCounters);
    const lat: [string, LatencyStats][] = [
      ['round trip', latency(p)],
      ['host → IPU', hostIpuLatency(p)],
      ['compute', computeLatency(p)],
      ['IPU → host', ipuHostLatency(p)],
    ];
    tables.push({
      title: 'Latency of the last run',
      caption: `Per iteration of the last run, from the stream copies' timestamps (PopTorch's getLatency and friends): mean (minimum – maximum). Streams: ${[...last.perfCounters.inputStreams, ...last.perfCounters.outputStreams].map((h) => (names.has(h) ? `${h} = ${names.get(h)}` : h)).join(', ') || 'none'}.`,
      head: ['latency', 'mean (min – max)'],
      numeric: [false, true],
      rows: lat.map(([k, l]) => [k, latencyText(l)]),
    });
    tables.push(computeSetTable(e, clockHz));
    const steps = stepTable(e, clockHz);
    tables.push(steps.table);
    if (steps.hidden) notes.push(`The program steps table shows the first ${MAX_ROWS} rows; ${steps.hidden} more are in ${f.dir}/profile.json.`);
    if (ex.historyDropped) notes.push(`profile.json lists the latest ${ex.history.length} runs; ${ex.historyDropped} earlier ones are counted in the totals only.`);
    const unestimated = e.computeSets.reduce((n, x) => n + x.unestimatedVertices, 0);
    if (unestimated) notes.push(`${unestimated} vertices have no cycle estimate: they count 0 cycles.`);
  }
  tables.push(memoryTable(f));
  const T = e.target.tilesPerIpu;
  const tiles = Array.from({ length: e.target.ipus }, (_, ipu) => ({ ipu, bytes: e.memory.tiles.slice(ipu * T, (ipu + 1) * T), bytesPerTile: e.target.bytesPerTile }));
  return { dir: f.dir, facts, cards, notes, tables, tiles };
}

// ----------------------------------------------------------------------------------------------
// Markup

/** Text for HTML content and attributes (html.ts's escapeHtml; not imported, as html.ts imports this file). */
function esc(s: string): string {
  return s.replace(/[&<>"']/g, (ch) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[ch]!);
}

function tableHtml(t: ProfileTable): string[] {
  const cell = (tag: 'th' | 'td', text: string, i: number, pad = 0) =>
    `<${tag}${t.numeric[i] ? ' class="n"' : ''}${pad ? ` style="padding-left:${10 + 14 * pad}px"` : ''}>${esc(text)}</${tag}>`;
  return [
    `<h3>${esc(t.title)}</h3>`,
    `<p class="note">${esc(t.caption)}</p>`,
    '<table class="t">',
    `<thead><tr>${t.head.map((h, i) => cell('th', h, i)).join('')}</tr></thead>`,
    '<tbody>',
    ...t.rows.map((r, k) => `<tr>${r.map((x, i) => cell('td', x, i, i === 0 ? (t.depth?.[k] ?? 0) : 0)).join('')}</tr>`),
    '</tbody>',
    '</table>',
  ];
}

/** A heat map of one IPU's tiles, 46 a row as on the Memory tab: darker is fuller, red is over a tile's memory. */
function tilesHtml(t: ProfileSection['tiles'][number]): string {
  const max = Math.max(1, ...t.bytes);
  const cells = t.bytes.map((b, i) => {
    const over = b > t.bytesPerTile;
    const light = over ? 55 : Math.round(97 - 62 * (b / max));
    return `<i style="background:hsl(${over ? 0 : 338},${b ? 65 : 0}%,${light}%)" title="tile ${i}: ${b} bytes"></i>`;
  });
  return [
    `<p class="note">IPU ${t.ipu}: a square per tile, the darkest ${formatCount(max)} bytes; hover for a tile's bytes</p>`,
    // grid items are blocks: the cells need only their colour
    `<div class="profile-tiles" style="display:grid;grid-template-columns:repeat(46,9px);grid-auto-rows:9px;gap:1px;margin-bottom:12px">${cells.join('')}</div>`,
  ].join('\n');
}

/** The Profile tab as markup. */
export function profileTabHtml(p: ProfileSection): string {
  return [
    '<h2>Profile</h2>',
    '<p class="note">Measured on the emulated IPU (poplar-host), which runs on this machine\'s CPU: wall times of replica 0 beside the cycle estimates. Cycles are estimates, not hardware counters.</p>',
    '<table class="t facts">',
    ...p.facts.map(([k, v]) => `<tr><th>${esc(k)}</th><td>${esc(v)}</td></tr>`),
    '</table>',
    ...(p.notes.length ? ['<ul class="warnings">', ...p.notes.map((n) => `<li>${esc(n)}</li>`), '</ul>'] : []),
    ...(p.cards.length ? ['<div class="cards">', ...p.cards.map(([k, v, s]) => `<div class="card"><div class="k">${esc(k)}</div><div class="v">${esc(v)}</div><div class="s">${esc(s)}</div></div>`), '</div>'] : []),
    ...p.tables.flatMap(tableHtml),
    ...p.tiles.map(tilesHtml),
  ].join('\n');
}

/**
 * `report --profile DIR`: the profile folder read and checked now (before the build; a missing
 * or malformed file is a diagnostic naming it), the section made once the report's model is known.
 */
/**
 * The profile files --profile may read (compile.json and profile.json in the folder or a model
 * folder in it) checked before any is opened: a FIFO or a link into /proc is a wrong path (exit 2).
 */
function checkProfileFiles(dir: string): void {
  let subs: string[];
  try {
    subs = fs.statSync(dir).isDirectory() ? fs.readdirSync(dir, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => path.join(dir, e.name)) : [];
  } catch {
    return; // no such folder: said by the reader
  }
  for (const d of [dir, ...subs]) {
    for (const f of ['compile.json', 'profile.json']) {
      const p = path.join(d, f);
      let present = true;
      try {
        fs.lstatSync(p);
      } catch {
        present = false;
      }
      if (present) checkInputFile(p, 'profile file (--profile)');
    }
  }
}

export function profileFlagSection(dir: string, htmlFile: string | undefined, pipeline: string): (reportModel: string) => ProfileSection {
  if (htmlFile === undefined) throw new UsageError('--profile adds a Profile tab to the HTML report; give --html FILE as well');
  checkProfileFiles(dir);
  const folder = readProfileFolder(dir, pipeline);
  return (reportModel) => profileSection(folder, reportModel);
}
