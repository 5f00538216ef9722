/**
 * The report page's script, inlined in the HTML file (no template literals inside: it is one). It
 * reads the JSON block and draws the four tabs (a fifth, Benchmarks, comes as markup). Every name
 * from the model goes into the page with textContent or as an attribute value set through the DOM,
 * never as markup.
 */
export const CLIENT_JS = String.raw`(function () {
'use strict';
var D = JSON.parse(document.getElementById('report-data').textContent);
var S = D.strings;
var SVGNS = 'http://www.w3.org/2000/svg';
var PALETTE = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1', '#ff9da7', '#9c755f', '#bab0ac'];

// ---------------------------------------------------------------- helpers
function el(tag, cls, text) {
  var e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}
function sv(tag, attrs) {
  var e = document.createElementNS(SVGNS, tag);
  if (attrs) for (var k in attrs) if (attrs[k] !== undefined) e.setAttribute(k, String(attrs[k]));
  return e;
}
function svText(x, y, text, cls) {
  var t = sv('text', { x: x, y: y, 'class': cls });
  t.textContent = text;
  return t;
}
function fmtInt(n) { return Math.round(n).toLocaleString('en-US'); }
function fmtBytes(n) {
  if (n >= 1073741824) return (n / 1073741824).toFixed(2) + ' GiB';
  if (n >= 1048576) return (n / 1048576).toFixed(1) + ' MiB';
  if (n >= 1024) return (n / 1024).toFixed(1) + ' KiB';
  return fmtInt(n) + ' bytes';
}
function fmtCycles(n) {
  if (n >= 1e9) return (n / 1e9).toFixed(2) + ' G';
  if (n >= 1e6) return (n / 1e6).toFixed(2) + ' M';
  if (n >= 1e4) return (n / 1e3).toFixed(1) + ' k';
  return fmtInt(n);
}
function pct(x) { return (100 * x).toFixed(1) + '%'; }
function us(cycles) { return (cycles / D.device.clockHz * 1e6).toFixed(1) + ' µs'; }
function colorOf(i) {
  if (i < PALETTE.length) return PALETTE[i];
  return 'hsl(' + ((i * 137.508) % 360).toFixed(0) + ', 55%, 52%)';
}
function tint(hex, amount) {
  if (hex.charAt(0) !== '#') return '#f1f3f5';
  var r = parseInt(hex.substr(1, 2), 16), g = parseInt(hex.substr(3, 2), 16), b = parseInt(hex.substr(5, 2), 16);
  var m = function (c) { return Math.round(c + (255 - c) * amount); };
  return 'rgb(' + m(r) + ',' + m(g) + ',' + m(b) + ')';
}
function cut(s, n) { return s.length > n ? s.slice(0, n - 1) + '…' : s; }
function cutLeft(s, n) { return s.length > n ? '…' + s.slice(s.length - n + 1) : s; }
function card(k, v, s) {
  var c = el('div', 'card');
  c.appendChild(el('div', 'k', k));
  c.appendChild(el('div', 'v', v));
  if (s) c.appendChild(el('div', 's', s));
  return c;
}
function table(head, rows, numeric) {
  var t = el('table', 't');
  var tr = el('tr');
  head.forEach(function (h, i) { var th = el('th', numeric && numeric[i] ? 'n' : '', h); tr.appendChild(th); });
  var thead = el('thead'); thead.appendChild(tr); t.appendChild(thead);
  var tb = el('tbody');
  rows.forEach(function (r) {
    var row = el('tr');
    r.forEach(function (x, i) {
      var td = el('td', numeric && numeric[i] ? 'n' : '');
      if (x instanceof Node) td.appendChild(x); else td.textContent = x === undefined || x === null ? '' : String(x);
      row.appendChild(td);
    });
    tb.appendChild(row);
  });
  t.appendChild(tb);
  return t;
}

// ---------------------------------------------------------------- tooltip
var tip = el('div', 'tip');
tip.setAttribute('role', 'tooltip');
document.body.appendChild(tip);
var tips = new WeakMap();
function setTip(node, fn) { tips.set(node, fn); }
function tipFor(target) {
  for (var n = target; n && n !== document; n = n.parentNode) if (tips.has(n)) return { node: n, fn: tips.get(n) };
  return null;
}
function showTip(ev, content) {
  tip.replaceChildren();
  tip.appendChild(el('div', 'tt', content.title));
  (content.lines || []).forEach(function (l) {
    var d = el('div', 'tl');
    if (Array.isArray(l)) { d.appendChild(el('span', 'tk', l[0] + ': ')); d.appendChild(document.createTextNode(String(l[1]))); } else d.textContent = l;
    tip.appendChild(d);
  });
  tip.style.display = 'block';
  moveTip(ev);
}
function moveTip(ev) {
  var w = tip.offsetWidth, h = tip.offsetHeight;
  var x = ev.clientX + 14, y = ev.clientY + 14;
  if (x + w > window.innerWidth - 8) x = Math.max(8, ev.clientX - w - 14);
  if (y + h > window.innerHeight - 8) y = Math.max(8, ev.clientY - h - 14);
  tip.style.left = x + 'px';
  tip.style.top = y + 'px';
}
var tipNode = null;
document.addEventListener('mouseover', function (ev) {
  var t = tipFor(ev.target);
  if (!t) { tip.style.display = 'none'; tipNode = null; return; }
  if (t.node !== tipNode) { tipNode = t.node; showTip(ev, t.fn(ev)); }
});
document.addEventListener('mousemove', function (ev) {
  if (!tipNode) return;
  var t = tipFor(ev.target);
  if (t && t.node === tipNode && t.node.dataset && t.node.dataset.live) showTip(ev, t.fn(ev));
  else if (tip.style.display === 'block') moveTip(ev);
});
document.addEventListener('mouseleave', function () { tip.style.display = 'none'; tipNode = null; });

// ---------------------------------------------------------------- header, tabs, problems
(function header() {
  var chips = document.getElementById('chips');
  var add = function (text, cls) { chips.appendChild(el('span', 'chip' + (cls ? ' ' + cls : ''), text)); };
  var d = D.device;
  add(D.pipeline + ' step of ' + D.module);
  add(d.ipus + ' IPU' + (d.ipus > 1 ? 's' : '') + ' × ' + fmtInt(d.tilesPerIpu) + ' tiles × ' + fmtInt(d.bytesPerTile) + ' bytes');
  if (d.replicationFactor > 1) add(d.replicationFactor + ' replicas');
  var tl = D.timeline;
  if (tl.pipeline) {
    add((tl.kind === 'sequential' ? 'execution phases: ' : 'pipelined (' + (tl.pipeline.pipelineSchedule || 'Grouped') + '): ') + tl.pipeline.stages.length + ' stages × ' + tl.pipeline.microBatches + ' micro-batches');
    add('≈ ' + fmtCycles(tl.pipeline.cyclesPerWeightUpdate) + ' cycles per ' + (D.pipeline === 'training' ? 'weight update' : tl.pipeline.microBatches + ' micro-batches') + ' (' + us(tl.pipeline.cyclesPerWeightUpdate) + ', estimated)');
  } else if (tl.runCycles !== undefined) {
    add('≈ ' + fmtCycles(tl.runCycles) + ' cycles per run (' + us(tl.runCycles) + ', estimated)');
  }
  add(D.fits ? 'fits in tile memory' : 'does not fit in tile memory', D.fits ? 'ok' : 'bad');
  var n = 0; D.graphs.forEach(function (g) { n += g.ops.length; });
  add(fmtInt(n) + ' ops in ' + D.graphs.length + ' graph' + (D.graphs.length > 1 ? 's' : ''));
  if (D.problems.length) {
    var box = el('div', 'problems');
    box.appendChild(el('h3', '', 'Out of memory'));
    var ul = el('ul');
    D.problems.forEach(function (p) {
      var li = el('li', '', p.message + (p.location ? ' (' + p.location + ')' : ''));
      if (p.notes.length) {
        var notes = el('ul', 'notes');
        p.notes.forEach(function (x) { notes.appendChild(el('li', '', x)); });
        li.appendChild(notes);
      }
      ul.appendChild(li);
    });
    box.appendChild(ul);
    document.getElementById('problems').appendChild(box);
  }
})();

var drawn = {};
var DRAW = {};
var TABS = ['graph', 'schedule', 'memory', 'compile'];
// the Benchmarks tab (report --bench) is written into the page as it is: nothing to draw
if (document.getElementById('tab-bench')) TABS.push('bench');
DRAW.bench = function () {};
// so is the Profile tab (report --profile)
if (document.getElementById('tab-profile')) TABS.push('profile');
DRAW.profile = function () {};
function showTab(name) {
  document.querySelectorAll('.tabs button').forEach(function (b) { b.setAttribute('aria-selected', String(b.dataset.tab === name)); });
  document.querySelectorAll('main .tab').forEach(function (s) { s.hidden = s.id !== 'tab-' + name; });
  var done = null;
  if (!drawn[name]) { drawn[name] = true; done = DRAW[name](); }
  try { history.replaceState(null, '', '#' + name); } catch (e) { /* some file: URLs refuse it */ }
  return Promise.resolve(done);
}
document.querySelectorAll('.tabs button').forEach(function (b) { b.addEventListener('click', function () { showTab(b.dataset.tab); }); });

// ---------------------------------------------------------------- graph
var G = {
  gi: 0, colorBy: 'ipu', trees: [], expanded: [], layout: null, view: { x: 0, y: 0, k: 1 },
  sel: null, hit: null, query: '', matches: [], cur: -1, svg: null, root: null, nodes: {}, users: []
};
function opLoc(op) { return S[op.l]; }
function opScope(op) { return S[op.s]; }
// crowds of ops without a scope (the weight update) are grouped by the state they read or write
var CROWD = 60, CHUNK = 60;
function stateNames(g) {
  var n = g.ops.length, up = new Array(n), users = new Array(n);
  for (var i = 0; i < n; i++) { up[i] = i; users[i] = 0; }
  var find = function (x) { while (up[x] !== x) { up[x] = up[up[x]]; x = up[x]; } return x; };
  g.ops.forEach(function (op) { op.i.forEach(function (j) { users[j]++; }); });
  g.ops.forEach(function (op, i) {
    if (S[op.s]) return;
    op.i.forEach(function (j) {
      var o = g.ops[j];
      // shared values (the learning rate, the loss scaling) would join everything
      if (!S[o.s] && users[j] <= 8 && o.b === op.b) up[find(i)] = find(j);
    });
  });
  var names = {};
  g.ops.forEach(function (op, i) { var r = find(i); if (!S[op.s] && !(r in names) && (op.k === 'parameter' || op.k === 'variable') && op.n) names[r] = op.n; });
  return g.ops.map(function (op, i) { return S[op.s] ? null : names[find(i)] || null; });
}
function treeOf(gi) {
  if (G.trees[gi]) return G.trees[gi];
  var g = D.graphs[gi];
  var groups = [];
  var root = { n: -1, name: '', path: '', parent: null, kids: [], kidMap: {}, ops: [], count: 0, depth: 0 };
  var opGroup = new Array(g.ops.length);
  var crowd = {};
  g.ops.forEach(function (op) { if (!S[op.s]) crowd[op.b] = (crowd[op.b] || 0) + 1; });
  var state = Object.keys(crowd).some(function (b) { return crowd[b] >= CROWD; }) ? stateNames(g) : null;
  var child = function (node, key, name, auto) {
    var c = Object.prototype.hasOwnProperty.call(node.kidMap, key) ? node.kidMap[key] : null;
    if (!c) {
      c = { n: groups.length, name: name, path: node.path ? node.path + ' / ' + name : name, parent: node, kids: [], kidMap: {}, ops: [], count: 0, depth: node.depth + 1, auto: auto };
      groups.push(c);
      node.kidMap[key] = c;
      node.kids.push(c);
    }
    return c;
  };
  g.ops.forEach(function (op, i) {
    var node = root;
    node.count++;
    var segs = opScope(op).split('/').filter(function (x) { return x; });
    if (op.b !== undefined) { node = child(node, 'b:' + op.b, 'block ' + op.b, ''); node.count++; }
    segs.forEach(function (x) { node = child(node, 's:' + x, x, ''); node.count++; });
    if (!segs.length && state && state[i] && crowd[op.b] >= CROWD) {
      // the state's dotted name as a path: encoder.layers.0.linear1.weight
      state[i].split('.').forEach(function (x) { node = child(node, 'w:' + x, x, 'state'); node.count++; });
    }
    node.ops.push(i);
    opGroup[i] = node;
  });
  // what is still crowded is cut into runs of consecutive ops
  groups.concat([root]).forEach(function (grp) {
    if (grp.ops.length <= 2 * CHUNK) return;
    var ops = grp.ops;
    grp.ops = [];
    for (var k = 0; k < ops.length; k += CHUNK) {
      var part = ops.slice(k, k + CHUNK);
      var c = child(grp, 'r:' + k, 'ops ' + (k + 1) + '–' + (k + part.length), 'run');
      c.count = part.length;
      c.ops = part;
      part.forEach(function (i) { opGroup[i] = c; });
    }
  });
  var t = { root: root, groups: groups, opGroup: opGroup };
  G.trees[gi] = t;
  return t;
}
// groups open at first: breadth first while the view stays small
function initialExpanded(gi) { return openWithin(gi, 48); }
function openWithin(gi, budget) {
  var t = treeOf(gi), open = {};
  var visible = t.root.kids.length + t.root.ops.length;
  var queue = t.root.kids.slice();
  while (queue.length) {
    var grp = queue.shift();
    var after = visible - 1 + grp.kids.length + grp.ops.length;
    if (after <= budget || grp.count <= 2) {
      open[grp.n] = true;
      visible = after;
      for (var i = 0; i < grp.kids.length; i++) queue.push(grp.kids[i]);
    }
  }
  return open;
}
function expandedOf(gi) {
  if (!G.expanded[gi]) G.expanded[gi] = initialExpanded(gi);
  return G.expanded[gi];
}
function chainOf(grp) { var c = []; for (var x = grp; x && x.n >= 0; x = x.parent) c.unshift(x); return c; }
// what stands for an op on screen: itself, or its outermost collapsed group
function repOf(gi, i) {
  var t = treeOf(gi), open = expandedOf(gi), chain = chainOf(t.opGroup[i]);
  for (var k = 0; k < chain.length; k++) if (!open[chain[k].n]) return chain[k];
  return null;
}
function keyOfRep(i, rep) { return rep ? 'g' + rep.n : 'o' + i; }

function catOf(op, gi) {
  if (G.colorBy === 'stage') return op.st === undefined ? null : op.st;
  if (G.colorBy === 'phase') return op.ph === undefined ? null : op.ph;
  if (G.colorBy === 'kind') return op.k;
  return op.ipu === undefined ? 0 : op.ipu;
}
var kindColors = {};
function colorOfCat(c) {
  if (c === null || c === undefined) return '#adb5bd';
  if (typeof c === 'number') return colorOf(c);
  if (!(c in kindColors)) kindColors[c] = colorOf(Object.keys(kindColors).length);
  return kindColors[c];
}
function catLabel(c) {
  if (c === null || c === undefined) return 'none';
  if (G.colorBy === 'kind') return c;
  return (G.colorBy === 'ipu' ? 'IPU ' : G.colorBy === 'stage' ? 'stage ' : 'phase ') + c;
}

var measureCtx = null;
function textWidth(s, font) {
  if (!measureCtx) measureCtx = document.createElement('canvas').getContext('2d');
  if (!measureCtx) return s.length * 6.8;
  measureCtx.font = font;
  return measureCtx.measureText(s).width;
}
var FONT = '11.5px system-ui, -apple-system, Segoe UI, Roboto, Arial, sans-serif';
var FONT_B = 'bold ' + FONT;
var FONT_M = '10.5px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace';

function opLines(op) {
  return { kind: op.k, name: cut(op.n, 44), type: cut(op.t, 46), loc: cutLeft(opLoc(op), 46) };
}
function sizeOfOp(op) {
  var l = opLines(op);
  var w = Math.max(textWidth(l.kind + '  ', FONT_B) + textWidth(l.name, FONT), textWidth(l.type, FONT_M), textWidth(l.loc, FONT_M)) + 22;
  return { width: Math.min(340, Math.max(120, Math.ceil(w))), height: 58 };
}
function groupSummary(gi, grp) {
  var g = D.graphs[gi], t = treeOf(gi), cats = {}, cycles = 0, first = null;
  (function walk(x) {
    x.ops.forEach(function (i) { var op = g.ops[i]; cats[String(catOf(op, gi))] = catOf(op, gi); cycles += op.c; if (first === null) first = i; });
    x.kids.forEach(walk);
  })(grp);
  var keys = Object.keys(cats);
  return { cat: keys.length === 1 ? cats[keys[0]] : undefined, mixed: keys.length > 1, cycles: cycles, first: first };
}
function sizeOfGroup(gi, grp) {
  var w = Math.max(textWidth('▸ ' + cut(grp.name, 40), FONT_B), textWidth(grp.count + ' ops · ' + fmtCycles(groupSummary(gi, grp).cycles) + ' cycles', FONT)) + 24;
  return { width: Math.min(340, Math.max(130, Math.ceil(w))), height: 46 };
}

function buildLayout(gi) {
  var g = D.graphs[gi], t = treeOf(gi), open = expandedOf(gi);
  var dg = new dagre.graphlib.Graph({ compound: true, multigraph: false });
  dg.setGraph({ rankdir: 'TB', nodesep: 18, ranksep: 34, edgesep: 10, marginx: 30, marginy: 30 });
  dg.setDefaultEdgeLabel(function () { return {}; });
  var clusters = {};
  var addCluster = function (grp) {
    if (!grp || grp.n < 0 || clusters[grp.n]) return;
    clusters[grp.n] = true;
    dg.setNode('c' + grp.n, { cluster: grp.n });
    if (grp.parent && grp.parent.n >= 0) { addCluster(grp.parent); dg.setParent('c' + grp.n, 'c' + grp.parent.n); }
  };
  var seen = {};
  var reps = new Array(g.ops.length);
  g.ops.forEach(function (op, i) {
    var rep = repOf(gi, i);
    reps[i] = rep;
    var key = keyOfRep(i, rep);
    if (seen[key]) return;
    seen[key] = true;
    var parent = rep ? rep.parent : t.opGroup[i];
    if (rep) dg.setNode(key, Object.assign({ group: rep.n }, sizeOfGroup(gi, rep)));
    else dg.setNode(key, Object.assign({ op: i }, sizeOfOp(op)));
    if (parent && parent.n >= 0) { addCluster(parent); dg.setParent(key, 'c' + parent.n); }
  });
  var edges = {};
  g.ops.forEach(function (op, i) {
    var b = keyOfRep(i, reps[i]);
    op.i.forEach(function (j) {
      var a = keyOfRep(j, reps[j]);
      if (a === b) return;
      var k = a + '>' + b;
      if (edges[k]) { edges[k].n++; return; }
      edges[k] = { n: 1 };
      dg.setEdge(a, b, edges[k]);
    });
  });
  dagre.layout(dg);
  return dg;
}

function nodeColor(gi, op) { return colorOfCat(catOf(op, gi)); }

function drawGraph() {
  var gi = G.gi, g = D.graphs[gi], t = treeOf(gi);
  var canvas = document.getElementById('canvas');
  var busy = el('div', 'busy', 'laying out ' + fmtInt(g.ops.length) + ' ops…');
  canvas.appendChild(busy);
  var token = G.token = (G.token || 0) + 1;
  // let the message paint before a long layout
  return new Promise(function (resolve) {
    setTimeout(function () {
      // a later request (another graph, another group) replaces this one
      if (token !== G.token || gi !== G.gi) { busy.remove(); resolve(); return; }
      var dg = buildLayout(gi);
      G.layout = dg;
      busy.remove();
      render(dg);
      drawLegend();
      resolve();
    }, 16);
  });
}

function render(dg) {
  var gi = G.gi, g = D.graphs[gi], t = treeOf(gi);
  var root = G.root;
  root.replaceChildren();
  G.nodes = {};
  var clusters = [], leaves = [];
  dg.nodes().forEach(function (k) { var n = dg.node(k); if (n.cluster !== undefined) clusters.push(k); else leaves.push(k); });
  clusters.sort(function (a, b) { return t.groups[dg.node(a).cluster].depth - t.groups[dg.node(b).cluster].depth; });
  var cl = sv('g', { 'class': 'clusters' });
  clusters.forEach(function (k) {
    var n = dg.node(k), grp = t.groups[n.cluster];
    var c = sv('g', { 'class': 'cluster' });
    c.appendChild(sv('rect', { x: n.x - n.width / 2, y: n.y - n.height / 2, width: n.width, height: n.height, rx: 8 }));
    var label = svText(n.x - n.width / 2 + 8, n.y - n.height / 2 + 14, '▾ ' + cut(grp.name, 60), 'clabel');
    label.addEventListener('click', function (ev) { ev.stopPropagation(); collapse(grp); });
    setTip(label, function () { return { title: grp.path, lines: [grp.count + ' ops', 'click to collapse'] }; });
    c.appendChild(label);
    cl.appendChild(c);
  });
  root.appendChild(cl);
  var eg = sv('g', { 'class': 'edges' });
  dg.edges().forEach(function (e) {
    var d = dg.edge(e), pts = d.points || [];
    if (!pts.length) return;
    var s = 'M' + pts[0].x.toFixed(1) + ',' + pts[0].y.toFixed(1);
    for (var i = 1; i < pts.length; i++) s += ' L' + pts[i].x.toFixed(1) + ',' + pts[i].y.toFixed(1);
    var p = sv('path', { d: s, 'class': 'edge', 'marker-end': 'url(#arrow)', 'data-from': e.v, 'data-to': e.w });
    if (d.n > 1) p.setAttribute('stroke-width', String(Math.min(4, 1.2 + Math.log2(d.n))));
    eg.appendChild(p);
  });
  root.appendChild(eg);
  var ng = sv('g', { 'class': 'nodes' });
  leaves.forEach(function (k) {
    var n = dg.node(k);
    var x0 = n.x - n.width / 2, y0 = n.y - n.height / 2;
    var node = sv('g', { 'class': 'node ' + (n.op !== undefined ? 'op' : 'group'), transform: 'translate(' + x0.toFixed(1) + ',' + y0.toFixed(1) + ')', 'data-key': k });
    node.appendChild(sv('rect', { 'class': 'halo', x: -5, y: -5, width: n.width + 10, height: n.height + 10, rx: 10 }));
    if (n.op !== undefined) {
      var op = g.ops[n.op], col = nodeColor(gi, op), l = opLines(op);
      node.dataset.op = String(n.op);
      node.appendChild(sv('rect', { 'class': 'box', width: n.width, height: n.height, rx: 6, fill: tint(col, 0.85), stroke: col }));
      node.appendChild(sv('rect', { width: 5, height: n.height, rx: 2, fill: col }));
      var kt = svText(12, 17, l.kind, 'kind');
      node.appendChild(kt);
      if (l.name) node.appendChild(svText(12 + textWidth(l.kind + '  ', FONT_B), 17, l.name, 'name'));
      node.appendChild(svText(12, 33, l.type, 'type'));
      node.appendChild(svText(12, 48, l.loc, 'loc'));
      setTip(node, function () { return opTip(gi, n.op); });
      node.addEventListener('click', function () { if (!G.dragged) select(n.op); });
    } else {
      var grp = t.groups[n.group], sum = groupSummary(gi, grp);
      var gc = sum.mixed ? '#868e96' : colorOfCat(sum.cat);
      node.dataset.group = String(n.group);
      node.appendChild(sv('rect', { 'class': 'box', width: n.width, height: n.height, rx: 8, fill: tint(gc.charAt(0) === '#' ? gc : '#868e96', 0.9), stroke: gc }));
      node.appendChild(sv('rect', { x: 4, y: 4, width: n.width - 8, height: n.height - 8, rx: 6, fill: 'none', stroke: gc, 'stroke-opacity': 0.35 }));
      node.appendChild(svText(12, 19, '▸ ' + cut(grp.name, 40), 'kind'));
      node.appendChild(svText(12, 35, grp.count + ' ops · ' + fmtCycles(sum.cycles) + ' cycles' + (sum.mixed ? ' · mixed ' + G.colorBy : ''), 'type'));
      setTip(node, function () {
        var lines = [['ops', grp.count], ['estimated cycles', fmtInt(sum.cycles)], ['first op at', sum.first !== null ? opLoc(g.ops[sum.first]) : '']];
        if (grp.auto) lines.push(grp.auto === 'state' ? 'ops without a scope, grouped by the state they read or write' : 'consecutive ops without a scope');
        lines.push('click to expand');
        return { title: grp.path, lines: lines };
      });
      node.addEventListener('click', function () { if (!G.dragged) expand(grp); });
    }
    G.nodes[k] = node;
    ng.appendChild(node);
  });
  root.appendChild(ng);
  markMatches();
  if (G.sel !== null) markSelected();
}

function opTip(gi, i) {
  var op = D.graphs[gi].ops[i];
  var lines = [['type', op.t], ['at', opLoc(op)]];
  if (opScope(op)) lines.push(['scope', opScope(op)]);
  if (op.b !== undefined) lines.push(['block', op.b]);
  var place = [];
  if (op.ipu !== undefined) place.push('IPU ' + op.ipu);
  if (op.st !== undefined) place.push('stage ' + op.st);
  if (op.ph !== undefined) place.push('phase ' + op.ph);
  if (op.rc) place.push(op.rc);
  if (place.length) lines.push(['placed', place.join(', ')]);
  lines.push(['estimated cycles', fmtInt(op.c)]);
  return { title: op.k + (op.n ? ' ' + op.n : ''), lines: lines };
}

function applyView() {
  var v = G.view;
  G.root.setAttribute('transform', 'translate(' + v.x.toFixed(1) + ',' + v.y.toFixed(1) + ') scale(' + v.k.toFixed(4) + ')');
}
function fitView() {
  var dg = G.layout; if (!dg) return;
  var box = G.svg.getBoundingClientRect();
  var gw = dg.graph().width || 1, gh = dg.graph().height || 1;
  var k = Math.min(1, box.width / gw, box.height / gh);
  k = Math.max(k, 0.05);
  G.view = { k: k, x: (box.width - gw * k) / 2, y: Math.max(0, (box.height - gh * k) / 2) };
  applyView();
}
// the whole graph when it is legible so, else its top at a readable size
function initialView() {
  var dg = G.layout; if (!dg) return;
  var box = G.svg.getBoundingClientRect();
  var gw = dg.graph().width || 1, gh = dg.graph().height || 1;
  if (Math.min(box.width / gw, box.height / gh) >= 0.5) return fitView();
  var k = Math.max(0.5, Math.min(1, box.width / gw));
  var topNode = null;
  dg.nodes().forEach(function (key) { var n = dg.node(key); if (n.cluster === undefined && (!topNode || n.y < topNode.y)) topNode = n; });
  var x = gw * k <= box.width ? (box.width - gw * k) / 2 : box.width / 2 - (topNode ? topNode.x : gw / 2) * k;
  G.view = { k: k, x: x, y: 12 };
  applyView();
}
function centerOn(x, y, k) {
  var box = G.svg.getBoundingClientRect();
  G.view = { k: k, x: box.width / 2 - x * k, y: box.height / 2 - y * k };
  applyView();
}
function nodePos(key) { var n = G.layout && G.layout.hasNode(key) ? G.layout.node(key) : null; return n; }

// dagre's time grows fast with the boxes on screen: a view stays under these
var WARN_NODES = 250, MAX_NODES = 600;
function visibleCount(gi, open) {
  var count = function (grp) { if (grp.n >= 0 && !open[grp.n]) return 1; var n = grp.ops.length; grp.kids.forEach(function (k) { n += count(k); }); return n; };
  return count(treeOf(gi).root);
}
function toast(text) {
  var canvas = document.getElementById('canvas');
  var old = canvas.querySelector('.toast');
  if (old) old.remove();
  var t = el('div', 'toast', text);
  canvas.appendChild(t);
  setTimeout(function () { t.remove(); }, 7000);
}
function expand(grp) {
  var open = Object.assign({}, expandedOf(G.gi));
  open[grp.n] = true;
  // a lone child group opens with it
  var x = grp;
  while (x.kids.length === 1 && x.ops.length === 0) { x = x.kids[0]; open[x.n] = true; }
  var n = visibleCount(G.gi, open);
  if (n > MAX_NODES) { toast('Opening ' + grp.name + ' would put ' + fmtInt(n) + ' boxes on screen, too many to lay out here: close other groups first, or find an op with the search box.'); return Promise.resolve(); }
  if (n > WARN_NODES && !window.confirm('Laying out ' + fmtInt(n) + ' boxes may take a while. Go on?')) return Promise.resolve();
  G.expanded[G.gi] = open;
  return drawGraph().then(function () {
    var after = nodePos('c' + grp.n);
    if (!after) return;
    var box = G.svg.getBoundingClientRect(), k = Math.max(G.view.k, 0.6);
    // a tall cluster is shown from its top
    var y = after.height * k > box.height ? after.y - after.height / 2 + box.height / 2 / k - 20 : after.y;
    centerOn(after.x, y, k);
  });
}
function collapse(grp) {
  var open = expandedOf(G.gi);
  delete open[grp.n];
  return drawGraph().then(function () {
    var p = nodePos('g' + grp.n);
    if (p) centerOn(p.x, p.y, G.view.k);
  });
}
function setAll(openAll) {
  var t = treeOf(G.gi);
  var open = openAll ? openWithin(G.gi, WARN_NODES) : {};
  if (openAll && Object.keys(open).length < t.groups.length) toast('Opened what fits in ' + WARN_NODES + ' boxes: the ' + fmtInt(D.graphs[G.gi].ops.length) + ' ops of this graph are too many to lay out at once. Open the rest group by group.');
  G.expanded[G.gi] = open;
  drawGraph().then(initialView);
}

function usersOf(gi) {
  if (G.users[gi]) return G.users[gi];
  var g = D.graphs[gi], u = g.ops.map(function () { return []; });
  g.ops.forEach(function (op, i) { op.i.forEach(function (j) { u[j].push(i); }); });
  G.users[gi] = u;
  return u;
}
function select(i) {
  G.sel = i;
  markSelected();
  details(i);
}
function markSelected() {
  G.root.querySelectorAll('.node.sel').forEach(function (n) { n.classList.remove('sel'); });
  G.root.querySelectorAll('path.edge.hot').forEach(function (n) { n.classList.remove('hot'); });
  if (G.sel === null) return;
  var key = keyOfRep(G.sel, repOf(G.gi, G.sel));
  var node = G.nodes[key];
  if (node) node.classList.add('sel');
  G.root.querySelectorAll('path.edge').forEach(function (p) { if (p.getAttribute('data-from') === key || p.getAttribute('data-to') === key) p.classList.add('hot'); });
}
function opLink(gi, j) {
  var op = D.graphs[gi].ops[j];
  var a = el('a', '', op.k + (op.n ? ' ' + cut(op.n, 50) : ''));
  a.addEventListener('click', function () { goTo(gi, j); });
  setTip(a, function () { return opTip(gi, j); });
  return a;
}
function details(i) {
  var box = document.getElementById('details');
  box.replaceChildren();
  var gi = G.gi, g = D.graphs[gi], op = g.ops[i];
  box.appendChild(el('h3', '', op.k + (op.n ? ' ' + op.n : '')));
  var dl = el('dl');
  var row = function (k, v) { dl.appendChild(el('dt', '', k)); var dd = el('dd'); if (v instanceof Node) dd.appendChild(v); else dd.textContent = v; dl.appendChild(dd); };
  row('type', op.t);
  row('at', opLoc(op));
  if (opScope(op)) row('scope', opScope(op));
  if (op.b !== undefined) row('block', op.b);
  if (op.ipu !== undefined) row('IPU', String(op.ipu));
  if (op.st !== undefined) row('stage', String(op.st));
  if (op.ph !== undefined) row('phase', String(op.ph));
  if (op.rc) row('recompute', op.rc);
  row('cycles', fmtInt(op.c) + ' (estimated)');
  row('graph', g.name);
  box.appendChild(dl);
  if (op.f !== undefined) {
    box.appendChild(el('div', 'muted', 'made at (innermost first)'));
    box.appendChild(el('pre', '', S[op.f]));
  }
  var list = function (title, ids) {
    if (!ids.length) return;
    box.appendChild(el('div', 'muted', title));
    var ul = el('ul');
    ids.slice(0, 40).forEach(function (j) { var li = el('li'); li.appendChild(opLink(gi, j)); ul.appendChild(li); });
    if (ids.length > 40) ul.appendChild(el('li', 'muted', '… ' + (ids.length - 40) + ' more'));
    box.appendChild(ul);
  };
  list('inputs from', op.i);
  list('used by', usersOf(gi)[i]);
}

function openAncestors(gi, i) {
  var open = Object.assign({}, expandedOf(gi)), changed = false;
  var chain = chainOf(treeOf(gi).opGroup[i]);
  chain.forEach(function (grp) { if (!open[grp.n]) { open[grp.n] = true; changed = true; } });
  if (!changed) return false;
  // too much open already: only the way to the op
  if (visibleCount(gi, open) > WARN_NODES) { open = {}; chain.forEach(function (grp) { open[grp.n] = true; }); }
  G.expanded[gi] = open;
  return true;
}
function goTo(gi, i) {
  var needGraph = gi !== G.gi;
  if (needGraph) { G.gi = gi; document.getElementById('graph-pick').value = String(gi); G.sel = null; }
  var changed = openAncestors(gi, i);
  var done = needGraph || changed || !G.layout ? drawGraph() : Promise.resolve();
  return done.then(function () {
    G.hit = { gi: gi, i: i };
    G.root.querySelectorAll('.node.hit').forEach(function (n) { n.classList.remove('hit'); });
    var node = G.nodes['o' + i];
    if (node) node.classList.add('hit');
    var p = nodePos('o' + i);
    if (p) centerOn(p.x, p.y, Math.max(G.view.k, 0.9));
    select(i);
  });
}

// search: names, kinds, scopes, blocks and locations of every graph's ops
var searchIndex = null;
function buildIndex() {
  searchIndex = [];
  D.graphs.forEach(function (g, gi) {
    g.ops.forEach(function (op, i) {
      searchIndex.push({ gi: gi, i: i, text: (op.n + '\n' + op.k + '\n' + opScope(op) + '\n' + (op.b || '') + '\n' + opLoc(op)).toLowerCase() });
    });
  });
}
function search(q) {
  if (!searchIndex) buildIndex();
  G.query = q;
  q = q.trim().toLowerCase();
  var out = [];
  if (q) {
    var here = [], there = [];
    for (var k = 0; k < searchIndex.length; k++) {
      var e = searchIndex[k];
      if (e.text.indexOf(q) >= 0) (e.gi === G.gi ? here : there).push(e);
    }
    // exact and prefix name matches first
    var rank = function (e) { var n = D.graphs[e.gi].ops[e.i].n.toLowerCase(); return n === q ? 0 : n.indexOf(q) === 0 ? 1 : n.indexOf(q) >= 0 ? 2 : 3; };
    here.sort(function (a, b) { return rank(a) - rank(b); });
    there.sort(function (a, b) { return rank(a) - rank(b); });
    out = here.concat(there);
  }
  G.matches = out;
  G.cur = -1;
  showResults(document.activeElement === document.getElementById('search'));
  markMatches();
}
function showResults(open) {
  var count = document.getElementById('search-count');
  var res = document.getElementById('results');
  res.replaceChildren();
  res.hidden = !open;
  if (!G.query.trim()) { count.textContent = ''; res.hidden = true; return; }
  count.textContent = G.matches.length ? (G.cur >= 0 ? (G.cur + 1) + ' / ' : '') + G.matches.length + ' found' : 'no op found';
  if (!G.matches.length) { res.hidden = true; return; }
  G.matches.slice(0, 60).forEach(function (m, k) {
    var op = D.graphs[m.gi].ops[m.i];
    var d = el('div', k === G.cur ? 'cur' : '');
    d.appendChild(el('span', 'rn', op.n || op.k));
    d.appendChild(document.createTextNode(' ' + op.k + ' · ' + D.graphs[m.gi].name));
    d.appendChild(el('div', 'rl', opLoc(op) + (opScope(op) ? '  ' + opScope(op) : '')));
    d.addEventListener('mousedown', function (ev) { ev.preventDefault(); G.cur = k; showResults(false); goTo(m.gi, m.i); });
    res.appendChild(d);
  });
}
function markMatches() {
  if (!G.root) return;
  G.root.querySelectorAll('.node.match').forEach(function (n) { n.classList.remove('match'); });
  if (!G.query.trim()) return;
  G.matches.forEach(function (m) {
    if (m.gi !== G.gi) return;
    var key = keyOfRep(m.i, repOf(m.gi, m.i));
    if (G.nodes[key]) G.nodes[key].classList.add('match');
  });
}
function next(step) {
  if (!G.matches.length) return;
  G.cur = (G.cur + step + G.matches.length) % G.matches.length;
  var m = G.matches[G.cur];
  showResults(false);
  goTo(m.gi, m.i);
}

function drawLegend() {
  var lg = document.getElementById('legend');
  lg.replaceChildren();
  var g = D.graphs[G.gi], cats = {};
  g.ops.forEach(function (op) { var c = catOf(op, G.gi); cats[String(c)] = c; });
  var keys = Object.keys(cats).sort(function (a, b) { var x = cats[a], y = cats[b]; return typeof x === 'number' && typeof y === 'number' ? x - y : String(x) < String(y) ? -1 : 1; });
  lg.appendChild(el('span', 'muted', D.graphs[G.gi].role + ' · ' + fmtInt(g.ops.length) + ' ops · ≈ ' + fmtCycles(g.cycles) + ' cycles per execution · colour: '));
  keys.slice(0, 30).forEach(function (k) {
    var s = el('span');
    var sw = el('span', 'sw');
    sw.style.background = colorOfCat(cats[k]);
    s.appendChild(sw);
    s.appendChild(document.createTextNode(catLabel(cats[k])));
    lg.appendChild(s);
  });
  if (keys.length > 30) lg.appendChild(el('span', 'muted', '+ ' + (keys.length - 30) + ' more'));
}

DRAW.graph = function () {
  var tab = document.getElementById('tab-graph');
  var tools = el('div', 'graph-tools');
  var pick = el('select', 'b');
  pick.id = 'graph-pick';
  pick.setAttribute('aria-label', 'graph');
  D.graphs.forEach(function (g, gi) {
    var o = el('option', '', g.name + ' — ' + g.role + ' (' + fmtInt(g.ops.length) + ' ops)');
    o.value = String(gi);
    pick.appendChild(o);
  });
  pick.addEventListener('change', function () { G.gi = Number(pick.value); G.sel = null; document.getElementById('details').replaceChildren(el('p', 'muted', 'Click an op to see where it was made, its inputs and its users.')); drawGraph().then(initialView); });
  var lab = el('label', 'ctl', 'graph'); lab.appendChild(pick); tools.appendChild(lab);
  var color = el('select', 'b');
  color.id = 'color-by';
  [['ipu', 'IPU'], ['stage', 'pipeline stage'], ['phase', 'execution phase'], ['kind', 'op kind']].forEach(function (x) {
    var has = x[0] === 'ipu' || x[0] === 'kind' || D.graphs.some(function (g) { return g.ops.some(function (op) { return (x[0] === 'stage' ? op.st : op.ph) !== undefined; }); });
    if (!has) return;
    var o = el('option', '', x[1]); o.value = x[0]; color.appendChild(o);
  });
  color.addEventListener('change', function () { G.colorBy = color.value; render(G.layout); drawLegend(); });
  lab = el('label', 'ctl', 'colour by'); lab.appendChild(color); tools.appendChild(lab);
  var sbox = el('div', 'search');
  var input = el('input');
  input.id = 'search';
  input.type = 'search';
  input.placeholder = 'find an op: name, scope, kind or file:line  (press /)';
  input.setAttribute('aria-label', 'find an op');
  input.autocomplete = 'off';
  var timer = null;
  input.addEventListener('input', function () { clearTimeout(timer); timer = setTimeout(function () { search(input.value); }, 120); });
  input.addEventListener('keydown', function (ev) {
    if (ev.key === 'Enter') { ev.preventDefault(); clearTimeout(timer); if (G.query !== input.value) search(input.value); next(ev.shiftKey ? -1 : 1); }
    if (ev.key === 'Escape') { document.getElementById('results').hidden = true; }
  });
  input.addEventListener('focus', function () { if (G.matches.length) document.getElementById('results').hidden = false; });
  input.addEventListener('blur', function () { setTimeout(function () { document.getElementById('results').hidden = true; }, 150); });
  sbox.appendChild(input);
  var count = el('span', 'count'); count.id = 'search-count'; sbox.appendChild(count);
  var res = el('div', 'results'); res.id = 'results'; res.hidden = true; sbox.appendChild(res);
  tools.appendChild(sbox);
  var btn = function (text, fn, title) { var b = el('button', 'b', text); b.type = 'button'; b.title = title; b.addEventListener('click', fn); tools.appendChild(b); return b; };
  btn('fit', fitView, 'show the whole graph');
  btn('top', initialView, 'back to the top of the graph');
  btn('expand all', function () { setAll(true); }, 'open every block and scope (as many as can be laid out at once)');
  btn('collapse all', function () { setAll(false); }, 'close every block and scope');
  tab.appendChild(tools);
  var legend = el('div', 'legend'); legend.id = 'legend'; tab.appendChild(legend);
  var canvas = el('div', 'canvas'); canvas.id = 'canvas';
  var svg = sv('svg', { role: 'img', 'aria-label': 'the graph' });
  var defs = sv('defs');
  var marker = sv('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' });
  marker.appendChild(sv('path', { d: 'M0,0 L10,5 L0,10 z', fill: '#8d96a7' }));
  defs.appendChild(marker);
  svg.appendChild(defs);
  var root = sv('g');
  svg.appendChild(root);
  canvas.appendChild(svg);
  canvas.appendChild(el('div', 'hint', 'drag to pan · wheel to zoom · click a box to open a block or scope, its title to close it'));
  tab.appendChild(canvas);
  var det = el('aside', 'details'); det.id = 'details';
  det.appendChild(el('p', 'muted', 'Click an op to see where it was made, its inputs and its users.'));
  tab.appendChild(det);
  G.svg = svg;
  G.root = root;
  // pan and zoom
  var drag = null;
  svg.addEventListener('pointerdown', function (ev) { if (ev.button !== 0) return; drag = { x: ev.clientX, y: ev.clientY, vx: G.view.x, vy: G.view.y, moved: false }; G.dragged = false; });
  window.addEventListener('pointermove', function (ev) {
    if (!drag) return;
    var dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
    if (!drag.moved && Math.abs(dx) + Math.abs(dy) < 4) return;
    drag.moved = true; G.dragged = true; svg.classList.add('drag');
    G.view.x = drag.vx + dx; G.view.y = drag.vy + dy; applyView();
  });
  window.addEventListener('pointerup', function () { if (drag) { svg.classList.remove('drag'); setTimeout(function () { G.dragged = false; }, 0); } drag = null; });
  svg.addEventListener('wheel', function (ev) {
    ev.preventDefault();
    var r = svg.getBoundingClientRect(), px = ev.clientX - r.left, py = ev.clientY - r.top;
    var k = Math.min(3, Math.max(0.03, G.view.k * Math.exp(-ev.deltaY * 0.0015)));
    G.view.x = px - (px - G.view.x) * (k / G.view.k);
    G.view.y = py - (py - G.view.y) * (k / G.view.k);
    G.view.k = k;
    applyView();
  }, { passive: false });
  document.addEventListener('keydown', function (ev) {
    if (ev.key === '/' && document.activeElement !== input) { showTab('graph'); ev.preventDefault(); input.focus(); }
  });
  return drawGraph().then(initialView);
};
DRAW.showGraph = function (name) {
  var gi = D.graphs.findIndex(function (g) { return g.name === name; });
  if (gi < 0) return;
  showTab('graph');
  if (gi !== G.gi) { G.gi = gi; document.getElementById('graph-pick').value = String(gi); G.sel = null; drawGraph().then(initialView); }
};

// ---------------------------------------------------------------- schedule
var SEG_COLORS = { forward: '#4e79a7', backward: '#f28e2b', 'forward+backward': '#b07aa1', exchange: '#76b7b2', copy: '#9c755f' };
var BAND_FILL = { 'ramp-up': '#fff4e6', main: '#ebfbee', 'ramp-down': '#fff0f0', update: '#f3f0ff', graph: '#f8f9fa' };
function niceStep(range, n) {
  var raw = range / n, p = Math.pow(10, Math.floor(Math.log10(raw))), m = raw / p;
  return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}
DRAW.schedule = function () {
  var tab = document.getElementById('tab-schedule');
  var tl = D.timeline, P = tl.pipeline;
  tab.appendChild(el('h2', '', tl.kind === 'pipelined' ? 'Pipeline schedule' : tl.kind === 'sequential' ? 'Execution phases' : 'Step'));
  var cards = el('div', 'cards');
  if (P) {
    cards.appendChild(card(P.bubble.formula === null ? 'idle' : 'bubble', P.bubble.formula === null ? pct(P.bubble.estimate) : pct(P.bubble.formula), P.bubble.formula === null ? 'IPUs idle, from the estimates' : (P.pipelineSchedule && P.pipelineSchedule !== 'Grouped' ? '1 − p·m/(n·(L·(m−1)+p)), L = ' + P.interval : '(p−1)/(m+p−1)') + '; ' + pct(P.bubble.estimate) + ' idle from the estimates'));
    if (D.pipeline === 'training') cards.appendChild(card('per weight update', fmtCycles(P.cyclesPerWeightUpdate) + ' cycles', us(P.cyclesPerWeightUpdate) + ': loop ' + fmtCycles(P.loopCycles) + ' + update ' + fmtCycles(P.updateCycles)));
    else cards.appendChild(card('per loop', fmtCycles(P.cyclesPerWeightUpdate) + ' cycles', us(P.cyclesPerWeightUpdate) + ' for ' + P.microBatches + ' micro-batches'));
    if (P.samplesPerSecond !== undefined) cards.appendChild(card('throughput', fmtInt(P.samplesPerSecond) + ' samples/s', 'one replica, micro-batch ' + P.microBatchSize));
    cards.appendChild(card(tl.kind === 'sequential' ? 'phases' : 'stages', String(P.stages.length), P.microBatches + ' micro-batches per ' + (D.pipeline === 'training' ? 'weight update' : 'loop')));
    cards.appendChild(card('stash', fmtBytes(P.stash.reduce(function (a, s) { return a + s.bytes; }, 0)), P.stash.map(function (s) { return 'IPU ' + s.ipu + ' ' + fmtBytes(s.bytes); }).join(', ')));
  } else {
    cards.appendChild(card('one run', fmtCycles(tl.runCycles || 0) + ' cycles', us(tl.runCycles || 0) + ', every execution of every graph'));
    D.graphs.forEach(function (g) { if (g.executions) cards.appendChild(card(g.name, fmtCycles(g.cycles) + ' cycles', '× ' + g.executions + ' per run · ' + g.role)); });
  }
  tab.appendChild(cards);
  tab.appendChild(el('p', 'note', 'Cycles are estimated for a GC200 at ' + (D.device.clockHz / 1e9).toFixed(2) + ' GHz from the ops (not measured; host streams, collectives and remote-buffer copies are not counted). ' +
    (P ? 'Each pipeline cycle lasts as long as its busiest IPU, then the copies between IPUs; grey is idle time — the bubble.' : 'Without a pipeline the graphs run one after another and a graph sharded over IPUs runs its ops in turn: grey is idle time.')));
  var wrap = el('div', 'gantt-wrap');
  tab.appendChild(wrap);
  var W = Math.max(900, wrap.clientWidth - 24), L = 70, R = 12, top = 30, rowH = 30, gap = 8;
  var ipus = tl.ipus, H = top + ipus * (rowH + gap) + 30;
  var svg = sv('svg', { 'class': 'gantt', width: W, height: H, role: 'img', 'aria-label': 'schedule per IPU' });
  var defs = sv('defs');
  var pat = sv('pattern', { id: 'stripes', width: 6, height: 6, patternUnits: 'userSpaceOnUse', patternTransform: 'rotate(45)' });
  pat.appendChild(sv('rect', { width: 3, height: 6, fill: 'rgba(255,255,255,.45)' }));
  defs.appendChild(pat);
  svg.appendChild(defs);
  var total = Math.max(1, tl.total), x = function (t) { return L + (t / total) * (W - L - R); };
  tl.bands.forEach(function (b) {
    var band = sv('rect', { 'class': 'band', x: x(b.start), y: top - 22, width: Math.max(0.5, x(b.end) - x(b.start)), height: ipus * (rowH + gap) + 22, fill: BAND_FILL[b.kind] || '#f8f9fa' });
    // the whole name on hover: a narrow band shows it shortened, or not at all
    var name = sv('title');
    name.textContent = b.label;
    band.appendChild(name);
    svg.appendChild(band);
    if (x(b.end) - x(b.start) > 40) svg.appendChild(svText((x(b.start) + x(b.end)) / 2, top - 8, cut(b.label, Math.floor((x(b.end) - x(b.start)) / 7)), 'band-label'));
  });
  var graphColor = {};
  D.graphs.forEach(function (g, i) { graphColor[g.name] = g.name === 'update' ? '#59a14f' : colorOf(i); });
  for (var ipu = 0; ipu < ipus; ipu++) {
    var y = top + ipu * (rowH + gap);
    var row = sv('g', { 'class': 'gantt-row', 'data-ipu': ipu });
    row.appendChild(svText(8, y + rowH / 2 + 4, 'IPU ' + ipu, 'rowlabel'));
    var idle = sv('rect', { x: L, y: y, width: W - L - R, height: rowH, fill: '#e9ecef', rx: 3 });
    setTip(idle, (function (i) { return function () { return { title: 'IPU ' + i + ' idle', lines: ['no work here: the bubble (or waiting for the other IPUs)'] }; }; })(ipu));
    row.appendChild(idle);
    tl.segments.forEach(function (s) {
      if (s.ipu !== ipu) return;
      var x0 = x(s.start), w = Math.max(0.6, x(s.end) - x0);
      var fill = s.cat === 'graph' ? (s.graph === 'update' || s.label === 'weight update' ? '#59a14f' : graphColor[s.graph] || '#4e79a7') : SEG_COLORS[s.cat];
      var r = sv('rect', { 'class': 'seg', x: x0, y: y + (s.cat === 'exchange' || s.cat === 'copy' ? 8 : 0), width: w, height: s.cat === 'exchange' || s.cat === 'copy' ? rowH - 16 : rowH, fill: fill, rx: 2 });
      setTip(r, function () {
        var lines = [['IPU', s.ipu], ['estimated cycles', fmtInt(s.end - s.start)], ['from', fmtInt(s.start) + ' to ' + fmtInt(s.end)]];
        if (s.stage !== undefined) lines.unshift(['runs', s.cat + (s.recompute ? ', recomputes forward ops' : '')], ['micro-batch', s.microBatch]);
        if (s.graph) lines.push(['graph', s.graph + ' (click to open)']);
        return { title: s.stage !== undefined ? 'stage ' + s.stage + ', micro-batch ' + s.microBatch : s.label, lines: lines };
      });
      if (s.graph) r.addEventListener('click', function () { DRAW.showGraph(s.graph); });
      row.appendChild(r);
      if (s.recompute) row.appendChild(sv('rect', { x: x0, y: y, width: w, height: rowH, fill: 'url(#stripes)', 'pointer-events': 'none' }));
      if (w > 42 && s.cat !== 'exchange' && s.cat !== 'copy') row.appendChild(svText(x0 + 4, y + rowH / 2 + 4, cut(s.label, Math.floor((w - 6) / 6.2)), 'seg-label'));
    });
    svg.appendChild(row);
  }
  var axis = sv('g', { 'class': 'axis' });
  var ay = top + ipus * (rowH + gap) + 4, step = niceStep(total, 8);
  for (var t = 0; t <= total + 1e-9; t += step) {
    axis.appendChild(sv('line', { x1: x(t), x2: x(t), y1: top - 22, y2: ay }));
    axis.appendChild(svText(x(t) + 2, ay + 12, fmtCycles(t), ''));
  }
  svg.appendChild(axis);
  wrap.appendChild(svg);
  var lg = el('div', 'legend');
  lg.style.margin = '8px 0';
  var item = function (color, text, striped) {
    var s = el('span'), sw = el('span', 'sw');
    sw.style.background = striped ? 'repeating-linear-gradient(45deg,' + color + ' 0 3px, rgba(255,255,255,.6) 3px 6px)' : color;
    s.appendChild(sw); s.appendChild(document.createTextNode(text)); lg.appendChild(s);
  };
  if (P) {
    var has = function (f) { return tl.segments.some(f); };
    [['forward', 'forward'], ['backward', 'backward'], ['forward+backward', 'forward + backward'], ['exchange', 'stash / restore'], ['copy', 'inter-IPU copy']].forEach(function (x) {
      if (has(function (s) { return s.cat === x[0]; })) item(SEG_COLORS[x[0]], x[1]);
    });
    if (has(function (s) { return s.recompute; })) item(SEG_COLORS.backward, 'recomputes forward ops', true);
    if (has(function (s) { return s.cat === 'graph'; })) item('#59a14f', 'weight update');
    ['ramp-up', 'main', 'ramp-down'].forEach(function (k) { if (tl.bands.some(function (b) { return b.kind === k; })) item(BAND_FILL[k], k); });
  } else {
    D.graphs.forEach(function (g) { if (g.executions) item(graphColor[g.name], g.name); });
  }
  item('#e9ecef', 'idle');
  tab.appendChild(lg);
  if (P) {
    tab.appendChild(el('h3', '', tl.kind === 'sequential' ? 'Phases' : 'Stages'));
    tab.appendChild(table([tl.kind === 'sequential' ? 'phase' : 'stage', 'IPU', 'runs', 'graph', 'estimated cycles'], P.stages.map(function (s) {
      var a = el('a', '', s.graph); a.href = '#graph'; a.addEventListener('click', function (ev) { ev.preventDefault(); DRAW.showGraph(s.graph); });
      return [s.index, s.ipu, s.runs + (s.recompute ? ', recomputes' : ''), a, fmtInt(s.cycles)];
    }), [true, true, false, false, true]));
  }
};

// ---------------------------------------------------------------- memory
var HEAT = ['#f1f5fb', '#c6dbef', '#6baed6', '#2171b5', '#08306b'];
function heatColor(f) {
  if (!(f > 0)) return '#eceef1';
  f = Math.min(1, f);
  var p = f * (HEAT.length - 1), i = Math.min(HEAT.length - 2, Math.floor(p)), t = p - i;
  var a = HEAT[i], b = HEAT[i + 1];
  var c = function (k) { return Math.round(parseInt(a.substr(k, 2), 16) * (1 - t) + parseInt(b.substr(k, 2), 16) * t); };
  return 'rgb(' + c(1) + ',' + c(3) + ',' + c(5) + ')';
}
DRAW.memory = function () {
  var tab = document.getElementById('tab-memory');
  var d = D.device, M = D.memory, per = M.perIpu;
  var ipuBytes = d.tilesPerIpu * d.bytesPerTile;
  tab.appendChild(el('h2', '', 'Memory per IPU'));
  tab.appendChild(el('p', 'note', 'Always-live memory (weights, optimizer state, constants, vertex state) stays on the tiles for the whole program; the rest (activations, temporaries) peaks once. A tile holds ' + fmtInt(d.bytesPerTile) + ' bytes; an IPU ' + fmtBytes(ipuBytes) + '.'));
  var grid = el('div', 'ipu-mem');
  per.forEach(function (m) {
    var p = el('div', 'panel');
    p.appendChild(el('h3', '', 'IPU ' + m.ipu));
    var line = function (label, parts, of, text) {
      var r = el('div', 'barline');
      r.appendChild(el('span', 'muted', label));
      var bar = el('div', 'bar');
      parts.forEach(function (x) { var s = el('span'); s.style.width = Math.min(100, 100 * x[0] / of) + '%'; s.style.background = x[1]; setTip(s, function () { return { title: x[2], lines: [fmtInt(x[0]) + ' bytes (' + pct(x[0] / of) + ' of ' + fmtBytes(of) + ')'] }; }); bar.appendChild(s); });
      r.appendChild(bar);
      r.appendChild(el('span', 'n', text));
      p.appendChild(r);
    };
    line('IPU', [[m.alwaysLiveBytes, '#2171b5', 'always live'], [m.peakLiveBytes, '#9ecae1', 'peak of the rest']], ipuBytes, pct((m.alwaysLiveBytes + m.peakLiveBytes) / ipuBytes));
    line('fullest tile', [[m.maxTileAlwaysLive, '#2171b5', 'always live on the tile'], [m.maxTileBytes - m.maxTileAlwaysLive, '#9ecae1', 'peak of the rest on the tile']], d.bytesPerTile, pct(m.maxTileBytes / d.bytesPerTile));
    var dl = el('div', 'note');
    dl.textContent = 'always live ' + fmtBytes(m.alwaysLiveBytes) + ' · peak of the rest ' + fmtBytes(m.peakLiveBytes) + ' at ' + m.peakAt + (m.remoteBytes ? ' · off chip ' + fmtBytes(m.remoteBytes) : '');
    p.appendChild(dl);
    var ft = el('div', 'note');
    ft.textContent = 'fullest tile ' + m.maxTile + ': ' + fmtInt(m.maxTileBytes) + ' bytes, headroom ' + fmtInt(d.bytesPerTile - m.maxTileBytes) + ' bytes; it peaks at ' + m.maxTileAt;
    p.appendChild(ft);
    grid.appendChild(p);
  });
  tab.appendChild(grid);

  tab.appendChild(el('h2', '', 'Tiles'));
  var controls = el('div', 'heat-controls');
  var show = el('select', 'b');
  [['total', 'always live + peak of the rest'], ['always', 'always live'], ['peak', 'peak of the rest']].forEach(function (x) { var o = el('option', '', x[1]); o.value = x[0]; show.appendChild(o); });
  var scale = el('select', 'b');
  [['max', 'the fullest tile'], ['tile', 'tile memory (' + fmtInt(d.bytesPerTile) + ' bytes)']].forEach(function (x) { var o = el('option', '', x[1]); o.value = x[0]; scale.appendChild(o); });
  var lab = el('label', 'ctl', 'show'); lab.appendChild(show); controls.appendChild(lab);
  lab = el('label', 'ctl', 'darkest is'); lab.appendChild(scale); controls.appendChild(lab);
  var legend = el('span', 'heat-legend');
  var lo = el('span', '', '0'), grad = el('span', 'grad'), hi = el('span');
  grad.style.background = 'linear-gradient(90deg,' + HEAT.join(',') + ')';
  legend.appendChild(lo); legend.appendChild(grad); legend.appendChild(hi);
  controls.appendChild(legend);
  var over = el('span', 'heat-legend');
  var osw = el('span', 'grad'); osw.style.width = '12px'; osw.style.background = '#e03131';
  over.appendChild(osw); over.appendChild(document.createTextNode('over the tile memory'));
  controls.appendChild(over);
  tab.appendChild(controls);
  tab.appendChild(el('p', 'note', 'One cell per tile, ' + d.tilesPerIpu + ' per IPU in tile order (46 a row); the outlined cell is the fullest tile. Each tile counts its always-live bytes plus its own peak of the rest (tiles peak at different points of the program).'));
  var heats = el('div', 'heats');
  var cells = [];
  per.forEach(function (m) {
    var box = el('div', 'heat-box');
    box.appendChild(el('h3', '', 'IPU ' + m.ipu));
    box.appendChild(el('div', 'note', 'fullest tile ' + m.maxTile + ': ' + pct(m.maxTileBytes / d.bytesPerTile) + ' used, ' + fmtInt(d.bytesPerTile - m.maxTileBytes) + ' bytes free'));
    var h = el('div', 'heat');
    h.setAttribute('data-ipu', String(m.ipu));
    var list = [];
    for (var t = 0; t < d.tilesPerIpu; t++) {
      var c = el('div', 'tile');
      c.dataset.t = String(t);
      if (t === m.maxTile) c.classList.add('max');
      h.appendChild(c);
      list.push(c);
    }
    setTip(h, function (ev) {
      var t = ev && ev.target && ev.target.dataset ? Number(ev.target.dataset.t) : NaN;
      if (!(t >= 0)) return { title: 'IPU ' + m.ipu, lines: ['point at a tile'] };
      var a = m.tilesAlwaysLive[t], p = m.tilesPeak[t];
      return { title: 'IPU ' + m.ipu + ', tile ' + t + ' (tile ' + (m.ipu * d.tilesPerIpu + t) + ' of the device)', lines: [
        ['in use at its peak', fmtInt(a + p) + ' bytes (' + pct((a + p) / d.bytesPerTile) + ')'],
        ['always live', fmtInt(a) + ' bytes'], ['peak of the rest', fmtInt(p) + ' bytes'],
        ['headroom', fmtInt(d.bytesPerTile - a - p) + ' bytes']] };
    });
    h.dataset.live = '1';
    cells.push({ m: m, list: list });
    box.appendChild(h);
    heats.appendChild(box);
  });
  tab.appendChild(heats);
  var paint = function () {
    var value = function (m, t) { return show.value === 'always' ? m.tilesAlwaysLive[t] : show.value === 'peak' ? m.tilesPeak[t] : m.tilesAlwaysLive[t] + m.tilesPeak[t]; };
    var top = 1;
    if (scale.value === 'tile') top = d.bytesPerTile;
    else cells.forEach(function (x) { for (var t = 0; t < x.list.length; t++) top = Math.max(top, value(x.m, t)); });
    hi.textContent = fmtBytes(top);
    cells.forEach(function (x) {
      for (var t = 0; t < x.list.length; t++) {
        var v = value(x.m, t), total = x.m.tilesAlwaysLive[t] + x.m.tilesPeak[t];
        x.list[t].style.background = total > d.bytesPerTile ? '#e03131' : heatColor(v / top);
        x.list[t].classList.toggle('over', total > d.bytesPerTile);
      }
    });
  };
  show.addEventListener('change', paint);
  scale.addEventListener('change', paint);
  paint();

  tab.appendChild(el('h2', '', 'What is live at the peak'));
  var tensorRows = function (ts, onTile) {
    return ts.map(function (x) {
      return [x.name, x.kind, fmtBytes(x.bytes), onTile ? fmtInt(x.tileBytes) : fmtInt(x.tiles || 0), x.op || '', x.location || ''];
    });
  };
  per.forEach(function (m, k) {
    var det = el('details', 'ipu');
    if (k === 0) det.open = true;
    det.appendChild(el('summary', '', 'IPU ' + m.ipu + ': peak at ' + m.peakAt));
    if (m.atPeak.length) {
      det.appendChild(el('h3', '', 'largest tensors live at the IPU\'s peak'));
      det.appendChild(table(['tensor', 'kind', 'bytes', 'tiles', 'made by', 'at'], tensorRows(m.atPeak, false), [false, false, true, true, false, false]));
    }
    if (m.fullestTileLive.length) {
      det.appendChild(el('h3', '', 'on the fullest tile (' + m.maxTile + ') at its peak'));
      det.appendChild(table(['tensor', 'kind', 'bytes', 'on the tile', 'made by', 'at'], tensorRows(m.fullestTileLive, true), [false, false, true, true, false, false]));
    }
    if (m.fullestTileAlwaysLive.length) {
      det.appendChild(el('h3', '', 'always live on the fullest tile'));
      det.appendChild(table(['tensor', 'kind', 'bytes', 'on the tile', 'made by', 'at'], tensorRows(m.fullestTileAlwaysLive, true), [false, false, true, true, false, false]));
    }
    tab.appendChild(det);
  });

  tab.appendChild(el('h2', '', 'Remote memory (off chip)'));
  if (!M.remote.length) tab.appendChild(el('p', 'muted', 'No state is kept off chip: everything lives in tile memory.'));
  else tab.appendChild(table(['tensor', 'role', 'IPU', 'type', 'bytes per replica'], M.remote.map(function (r) { return [r.name, r.role, r.ipu, r.type, fmtBytes(r.bytes)]; }), [false, false, true, false, true]));
};

// ---------------------------------------------------------------- compile
DRAW.compile = function () {
  var tab = document.getElementById('tab-compile');
  var C = D.compile;
  tab.appendChild(el('h2', '', 'Compile'));
  var cards = el('div', 'cards');
  var passMs = C.passes.reduce(function (a, p) { return a + p.ms; }, 0);
  cards.appendChild(card('load + passes', C.loadAndPassesMs.toFixed(0) + ' ms', C.passes.length ? C.passes.length + ' passes: ' + passMs.toFixed(0) + ' ms' : 'the inference step is built without the pass manager'));
  cards.appendChild(card('code + memory plan', C.generateMs.toFixed(0) + ' ms', 'Poplar C++ and the tile-memory plan'));
  var n = 0; D.graphs.forEach(function (g) { n += g.ops.length; });
  cards.appendChild(card('ops', fmtInt(n), D.graphs.length + ' graph' + (D.graphs.length > 1 ? 's' : '') + ' after the passes'));
  tab.appendChild(cards);
  if (C.passes.length) {
    tab.appendChild(el('h3', '', 'Passes, in order'));
    var max = Math.max.apply(null, C.passes.map(function (p) { return p.ms; }).concat([1e-9]));
    var prev = null;
    tab.appendChild(table(['#', 'pass', 'time', '', 'share', 'ops after', 'change'], C.passes.map(function (p, i) {
      var bar = el('div', 'bar'); var s = el('span'); s.style.width = (100 * p.ms / max).toFixed(1) + '%'; s.style.background = '#d6336c'; bar.appendChild(s);
      var change = p.ops !== undefined && prev !== null ? p.ops - prev : null;
      if (p.ops !== undefined) prev = p.ops;
      return [i + 1, p.pass, p.ms.toFixed(2) + ' ms', bar, passMs > 0 ? pct(p.ms / passMs) : '', p.ops === undefined ? '' : fmtInt(p.ops), change === null ? '' : change === 0 ? '—' : (change > 0 ? '+' : '') + fmtInt(change)];
    }), [true, false, true, false, true, true, true]));
  } else {
    tab.appendChild(el('p', 'muted', 'No per-pass timings: the inference step is built without the pass manager.'));
  }
  tab.appendChild(el('h3', '', 'Graphs'));
  tab.appendChild(table(['graph', 'what', 'ops', 'estimated cycles', 'executions per run'], D.graphs.map(function (g) {
    var a = el('a', '', g.name); a.href = '#graph'; a.addEventListener('click', function (ev) { ev.preventDefault(); DRAW.showGraph(g.name); });
    return [a, g.role, fmtInt(g.ops.length), fmtInt(g.cycles), g.executions];
  }), [false, false, true, true, true]));
  if (D.warnings.length) {
    tab.appendChild(el('h3', '', 'Warnings'));
    var ul = el('ul', 'warnings');
    D.warnings.forEach(function (w) { ul.appendChild(el('li', '', w.message + (w.location ? ' (' + w.location + ')' : '') + (w.notes.length ? ' — ' + w.notes.join('; ') : ''))); });
    tab.appendChild(ul);
  }
};

var first = (location.hash || '').slice(1);
showTab(TABS.indexOf(first) >= 0 ? first : 'graph').then(function () { document.body.setAttribute('data-ready', '1'); });
})();
`;
