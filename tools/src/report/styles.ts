/** The report's styles (inlined in its <style> element). */
export const REPORT_CSS = String.raw`
:root {
  --bg: #f6f7f9; --panel: #fff; --ink: #1d2330; --muted: #667085; --line: #e3e6ec; --accent: #d6336c;
  --head: #1c2130; --head-ink: #eef0f5; --ok: #2f9e44; --bad: #e03131; --warn: #f08c00;
  --mono: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace;
  --sans: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
}
* { box-sizing: border-box; }
html, body { margin: 0; background: var(--bg); color: var(--ink); font: 14px/1.45 var(--sans); }
.top { background: var(--head); color: var(--head-ink); padding: 12px 20px 0; position: sticky; top: 0; z-index: 20; box-shadow: 0 1px 4px rgba(0,0,0,.25); }
.brand { font-size: 16px; font-weight: 600; letter-spacing: .2px; }
.brand .logo { color: #fff; background: var(--accent); border-radius: 4px; padding: 1px 7px; margin-right: 4px; }
.brand .file { font-family: var(--mono); font-weight: 400; color: #c7cbe0; margin-left: 6px; }
.chips { display: flex; flex-wrap: wrap; gap: 6px; margin: 8px 0 10px; }
.chip { background: rgba(255,255,255,.09); border: 1px solid rgba(255,255,255,.14); border-radius: 999px; padding: 1px 10px; font-size: 12.5px; white-space: nowrap; }
.chip.ok { border-color: #5cb85c; color: #c3f0c8; }
.chip.bad { border-color: #ff6b6b; color: #ffd0d0; background: rgba(224,49,49,.2); }
.tabs { display: flex; gap: 2px; }
.tabs button { background: transparent; color: #aeb4c8; border: 0; border-bottom: 3px solid transparent; padding: 8px 16px 7px; font: inherit; font-weight: 600; cursor: pointer; }
.tabs button:hover { color: #fff; }
.tabs button[aria-selected="true"] { color: #fff; border-bottom-color: var(--accent); }
main { padding: 16px 20px 40px; }
.tab[hidden] { display: none !important; }
h2 { font-size: 17px; margin: 22px 0 10px; }
h2:first-child { margin-top: 4px; }
h3 { font-size: 14.5px; margin: 16px 0 8px; }
.muted { color: var(--muted); }
.mono { font-family: var(--mono); font-size: 12.5px; }
.note { color: var(--muted); font-size: 12.5px; margin: 6px 0; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 4px 0 14px; }
.card { background: var(--panel); border: 1px solid var(--line); border-radius: 8px; padding: 10px 14px; min-width: 170px; box-shadow: 0 1px 2px rgba(16,24,40,.04); }
.card .k { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .4px; }
.card .v { font-size: 20px; font-weight: 650; margin-top: 2px; }
.card .s { color: var(--muted); font-size: 12.5px; }
.panel { background: var(--panel); border: 1px solid var(--line); border-radius: 8px; padding: 12px 14px; margin-bottom: 14px; }
table.t { border-collapse: collapse; width: 100%; background: var(--panel); font-size: 13px; }
table.t th, table.t td { text-align: left; padding: 5px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
table.t th { color: var(--muted); font-weight: 600; font-size: 12px; background: #fafbfc; position: sticky; top: 0; }
table.t td.n, table.t th.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.t tr:hover td { background: #f8f9fb; }
.bar { height: 8px; background: #edf0f4; border-radius: 4px; overflow: hidden; min-width: 80px; display: flex; }
.bar > span { display: block; height: 100%; }
.problems { margin: 12px 20px 0; background: #fff5f5; border: 1px solid #ffc9c9; border-radius: 8px; padding: 10px 14px; }
.problems h3 { margin: 0 0 6px; color: var(--bad); }
.problems li { margin: 4px 0; }
.problems .notes { color: #5c6370; font-size: 12.5px; }
.warnings li { margin: 3px 0; }
.noscript { margin: 20px; padding: 12px; background: #fff3bf; border-radius: 6px; }
button.b, select.b { font: inherit; font-size: 13px; border: 1px solid #cfd4dc; background: #fff; border-radius: 6px; padding: 4px 10px; cursor: pointer; color: var(--ink); }
button.b:hover { background: #f2f4f7; }
label.ctl { font-size: 12.5px; color: var(--muted); display: inline-flex; align-items: center; gap: 6px; }

/* graph */
.graph-tab { display: grid; grid-template-columns: 1fr 320px; grid-template-rows: auto auto 1fr; gap: 8px 12px; height: calc(100vh - 150px); min-height: 520px; }
.graph-tools { grid-column: 1 / 3; display: flex; flex-wrap: wrap; gap: 8px 10px; align-items: center; }
.graph-tools select.b { max-width: 340px; }
.search { position: relative; }
.search input { font: inherit; font-size: 13px; width: 280px; padding: 5px 10px; border: 1px solid #cfd4dc; border-radius: 6px; }
.search input:focus { outline: 2px solid #f3a8c2; border-color: var(--accent); }
.search .count { font-size: 12px; color: var(--muted); margin-left: 6px; display: inline-block; min-width: 96px; }
.results { position: absolute; top: 32px; left: 0; width: 460px; max-height: 340px; overflow: auto; background: #fff; border: 1px solid var(--line); border-radius: 8px; box-shadow: 0 8px 24px rgba(16,24,40,.16); z-index: 30; }
.results div { padding: 5px 10px; cursor: pointer; border-bottom: 1px solid #f0f1f4; font-size: 12.5px; }
.results div:hover, .results div.cur { background: #fdf0f5; }
.results .rn { font-weight: 600; }
.results .rl { color: var(--muted); font-family: var(--mono); font-size: 11.5px; }
.legend { grid-column: 1 / 3; display: flex; flex-wrap: wrap; gap: 4px 14px; font-size: 12.5px; color: #3a4150; }
.legend .sw { display: inline-block; width: 12px; height: 12px; border-radius: 3px; vertical-align: -2px; margin-right: 5px; border: 1px solid rgba(0,0,0,.15); }
.canvas { position: relative; background: #fff; border: 1px solid var(--line); border-radius: 8px; overflow: hidden; min-height: 420px; }
.canvas svg { width: 100%; height: 100%; display: block; cursor: grab; user-select: none; }
.canvas svg.drag { cursor: grabbing; }
.canvas .busy { position: absolute; inset: 0; display: flex; align-items: center; justify-content: center; background: rgba(255,255,255,.7); font-weight: 600; color: var(--muted); }
.canvas .toast { position: absolute; left: 50%; top: 12px; transform: translateX(-50%); max-width: 80%; background: #1c2130; color: #fff; padding: 8px 14px; border-radius: 6px; font-size: 13px; box-shadow: 0 6px 18px rgba(0,0,0,.25); }
.canvas .hint { position: absolute; left: 10px; bottom: 8px; font-size: 11.5px; color: var(--muted); background: rgba(255,255,255,.85); padding: 2px 6px; border-radius: 4px; pointer-events: none; }
.details { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 12px 14px; overflow: auto; font-size: 13px; }
.details h3 { margin: 0 0 6px; word-break: break-all; }
.details dl { display: grid; grid-template-columns: 78px 1fr; gap: 3px 8px; margin: 8px 0; }
.details dt { color: var(--muted); }
.details dd { margin: 0; word-break: break-word; }
.details pre { font-family: var(--mono); font-size: 11.5px; background: #f6f7f9; border-radius: 6px; padding: 6px 8px; white-space: pre-wrap; word-break: break-all; margin: 4px 0; }
.details a { color: #1c64c8; cursor: pointer; text-decoration: none; }
.details a:hover { text-decoration: underline; }
.details ul { padding-left: 18px; margin: 4px 0; }
svg .node { cursor: pointer; }
svg .node rect.box { stroke-width: 1.2; }
svg .node text { font-family: var(--sans); font-size: 11.5px; fill: #1d2330; pointer-events: none; }
svg .node text.kind { font-weight: 700; }
svg .node text.type, svg .node text.loc { font-family: var(--mono); font-size: 10.5px; fill: #4a5263; }
svg .node.group rect.box { stroke-dasharray: 0; stroke-width: 1.6; }
svg .node.group text.kind { font-size: 12px; }
svg .node:hover rect.box { stroke-width: 2.4; }
svg .node.sel rect.box { stroke: #111 !important; stroke-width: 2.6; }
svg .node.match rect.box { stroke: var(--accent) !important; stroke-width: 2.2; }
svg .node.hit rect.box { stroke: var(--accent) !important; stroke-width: 4; }
svg .node.hit rect.halo { display: block; }
svg rect.halo { display: none; fill: none; stroke: #f783ac; stroke-width: 10; opacity: .45; }
svg .cluster rect { fill: #fafbfd; stroke: #cfd5e1; stroke-width: 1; }
svg .cluster .clabel { font-size: 11.5px; font-weight: 600; fill: #495166; cursor: pointer; }
svg .cluster .clabel:hover { fill: var(--accent); }
svg path.edge { fill: none; stroke: #a3abba; stroke-width: 1.2; }
svg path.edge.hot { stroke: var(--accent); stroke-width: 2.2; }

/* schedule */
.gantt-wrap { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 10px 10px 4px; overflow-x: auto; }
.gantt text { font-size: 11.5px; fill: #1d2330; }
.gantt .rowlabel { font-weight: 650; }
.gantt .band-label { font-size: 11.5px; font-weight: 650; fill: #475066; text-anchor: middle; }
.gantt .seg { cursor: pointer; }
.gantt .seg:hover { stroke: #111; stroke-width: 1.5; }
.gantt .seg-label { fill: #fff; font-size: 10.5px; pointer-events: none; font-weight: 600; }
.gantt .axis text { fill: var(--muted); font-size: 10.5px; }
.gantt .axis line { stroke: #d7dbe3; }

/* memory */
.ipu-mem { display: grid; grid-template-columns: repeat(auto-fill, minmax(330px, 1fr)); gap: 12px; }
.ipu-mem .panel { margin: 0; }
.barline { display: grid; grid-template-columns: 92px 1fr 112px; gap: 8px; align-items: center; font-size: 12.5px; margin: 5px 0; }
.barline .bar { height: 12px; }
.heat-controls { display: flex; gap: 16px; flex-wrap: wrap; align-items: center; margin: 6px 0 10px; }
.heat-legend { display: inline-flex; align-items: center; gap: 6px; font-size: 12px; color: var(--muted); }
.heat-legend .grad { width: 180px; height: 10px; border-radius: 3px; border: 1px solid rgba(0,0,0,.1); }
.heats { display: flex; flex-wrap: wrap; gap: 16px; }
.heat-box { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px; }
.heat-box h3 { margin: 0 0 2px; }
.heat { display: grid; grid-template-columns: repeat(46, 8px); grid-auto-rows: 8px; gap: 1px; margin-top: 8px; }
.heat .tile { width: 8px; height: 8px; border-radius: 1px; background: #eef0f3; }
.heat .tile.max { outline: 2px solid #111; outline-offset: 0; z-index: 1; }
.heat .tile.over { outline: 2px solid var(--bad); }
details.ipu { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 8px 14px; margin: 10px 0; }
details.ipu summary { cursor: pointer; font-weight: 650; }

/* benchmarks */
#tab-bench table.t { margin: 4px 0; }
#tab-bench table.facts { width: auto; }
#tab-bench table.facts th { position: static; background: transparent; padding-right: 18px; }
#tab-bench code { font-family: var(--mono); font-size: 12.5px; }

/* tooltip */
.tip { position: fixed; z-index: 100; pointer-events: none; background: #1c2130; color: #eef0f5; border-radius: 6px; padding: 7px 10px; font-size: 12px; max-width: 460px; box-shadow: 0 6px 20px rgba(0,0,0,.3); display: none; }
.tip .tt { font-weight: 700; margin-bottom: 3px; word-break: break-all; }
.tip .tl { white-space: pre-wrap; word-break: break-word; }
.tip .tk { color: #9aa3bd; }
`;
