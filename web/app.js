/* memsnap plot page.
 *
 * Plain ES2020, no framework, no network. Reads the JSON that `memsnap plot`
 * embedded in <script id="memsnap-data">, decodes every base64 column once into
 * typed arrays, and draws one line per run with uPlot (embedded as the global
 * `uPlot`). The DOM-free part (formatting, decoding, regrouping, the live-at
 * scan) is web/transforms.js, loaded before this file as the global
 * `MemsnapTransforms`. The data contract is described in web/README.md.
 */
'use strict';

(() => {
  const T = globalThis.MemsnapTransforms;
  if (!T) {
    // A page assembled without the TRANSFORMS_JS placeholder: say so instead of a blank page.
    const el = document.getElementById('error');
    el.hidden = false;
    el.textContent = 'This page could not show the data: its transforms script (web/transforms.js) is missing.';
    return;
  }
  const {
    formatBytes, formatSignedBytes, formatCount, formatSignedCount, formatAxisBytes, formatSeconds,
    decimalsFor, formatMs, esc, withAlpha,
  } = T;
  const COLORS = ['#2563eb', '#ea580c', '#059669', '#7c3aed', '#db2777', '#0891b2', '#65a30d', '#b45309', '#475569'];
  const OOM_COLOR = '#dc2626';
  // Stacked view: a category keeps its colour on every page; sources take the
  // palette in rank order. Memory from before the trace, "other sources" and
  // reused addresses are greys.
  const LAYER_GREYS = { 'before the trace': '#cbd5e1', 'other sources': '#94a3b8', 'address reused without a free': '#475569' };
  const CATEGORY_COLORS = {
    parameter: '#2563eb', optimizer_state: '#7c3aed', gradient: '#db2777', activation: '#ea580c', temporary: '#ca8a04',
    input: '#0891b2', autograd_detail: '#65a30d', communication: '#059669', workspace: '#b45309', persistent: '#94a3b8', unknown: '#e2e8f0',
  };
  const SOURCE_COLORS = ['#2563eb', '#ea580c', '#059669', '#7c3aed', '#db2777', '#0891b2', '#65a30d', '#ca8a04',
    '#93c5fd', '#fdba74', '#6ee7b7', '#c4b5fd', '#f9a8d4', '#67e8f9', '#bef264', '#fde047'];
  // Stacked by source: how many sources get a layer of their own, unless the user picks.
  const DEFAULT_STACK_SOURCES = 8;
  const STACK_NAMES = { category: 'Stacked by category', source: 'Stacked by source' };
  const CLICK_COLOR = '#111827';
  // The drill-down row (and stacked layer) of allocations the replay still
  // counts after their address was reused without a free.
  const REUSED_ROW = 'address reused without a free';

  const $ = (id) => document.getElementById(id);

  // ---------------------------------------------------------------- state

  let DATA = null;
  let RUNS = [];
  let plot = null;
  let view = null; // what the current chart shows: series layout, grid, notes
  const state = {
    xMode: 'time',
    yMode: 'absolute',
    precisionMs: 1,
    precisionRequestedMs: 1,
    showAnnotations: false,
    showSteps: true,
    stack: 'lines', // 'lines' | 'category' | 'source'
    stackRun: 0, // the run the stacked view shows
    stackSources: DEFAULT_STACK_SOURCES, // stacked by source: sources with a layer of their own
    clickedTime: null,
    clickedEvent: null,
    zoom: null, // {min, max} of the x axis when zoomed in, in the x mode's units
  };
  const info = {
    ready: false, renderMs: 0, decodeMs: 0, drilldownMs: null, markers: { steps: 0, annotations: 0, oom: 0 },
    eventDrill: false, // the data has per-allocation event indices: clicks in the event-index view drill down
    xTicks: [], // the x tick labels of the last draw
    stack: null, // stacked view: { mode, run, layers: [names bottom to top] } of the last draw
    oomPanel: null, // the OOM panel shown: { run, ordinal, verdict }
    allocPanel: null, // the allocator panel shown: { clickedS, runs: [{ run, t_s, position, reserved, ... }] }
    groups: [], // with many runs: the legend's groups of runs that peak alike [{ members, peakMin, peakMax }]
    highlighted: null, // the run whose lines the legend's hover brings forward (others dimmed)
  };
  // Past this many runs the page trades the stat cards for one table and the
  // legend gains groups of runs that peak alike (64 ranks read as a few groups).
  const MANY_RUNS = 8;
  window.memsnapState = state;
  window.memsnapInfo = info;

  const hasTime = () => RUNS.length > 0 && RUNS.every((r) => r.time);
  // Every run's lifetimes carry start_event/end_event (see web/README.md).
  // Runs that embed moments instead of lifetimes drill down by time only.
  const hasEventIndex = () => RUNS.length > 0 && RUNS.some((r) => r.life) && RUNS.every((r) => !r.moments && T.hasEventIndex(r.life));
  // Cards, legend and table show run.name (distinguishingNames: the part of
  // the label that tells the runs apart); their title has this, label and file.
  const fullName = (run) => (run.file && run.file !== run.label ? `${run.label}\n${run.file}` : run.label);

  // ---------------------------------------------------------------- chart data

  // A source keeps its colour whatever the order and the number of layers:
  // `rank` is its place in the data's ranking (stackLayout).
  function layerColor(name, rank) {
    if (LAYER_GREYS[name]) return LAYER_GREYS[name];
    if (state.stack === 'category') return CATEGORY_COLORS[name] || '#64748b';
    return SOURCE_COLORS[Math.max(0, rank) % SOURCE_COLORS.length];
  }

  const hasStacks = () => RUNS.some((r) => r.stacks);

  // One run, absolute memory: a band per layer (each layer's bytes where the
  // bucket peaked, stacked bottom-up) and the run's max line over them. The
  // grid is built on the stack buckets, so the max line and the layers cover
  // the same spans and the top of the stack is the max line.
  function buildStackedView(zoom) {
    const run = RUNS[state.stackRun] || RUNS[0];
    const isTime = state.xMode === 'time';
    const v = { runs: [run], x: [], series: [], note: '', warn: '', G: 0, fineG: 0, window: null, stacked: true, names: [] };
    const stacks = run.stacks && run.stacks[state.stack];
    const buckets = isTime ? run.time : run.index;
    const sv = stacks && (isTime ? stacks.time : stacks.index);
    if (!buckets || !sv) {
      v.note = `${STACK_NAMES[state.stack]}: ${run.name} has no stacked data in this view (no trace events${run.stacks ? '' : ', or a page written by an older memsnap'}).`;
      return v;
    }
    const width = buckets.width * sv.per;
    const span = buckets.count * buckets.width;
    let edges;
    if (isTime) {
      const grid = T.timeGrid(width, span, state.precisionRequestedMs);
      edges = grid.edges;
      v.G = grid.G;
      v.fineG = v.G;
      v.x = edges.map((e) => e / 1e6);
      v.warn = grid.warn;
      state.precisionMs = v.G / 1000;
    } else {
      const grid = T.indexGrid(width, span, zoom);
      edges = grid.edges;
      v.G = grid.G;
      v.fineG = grid.fineG;
      v.window = grid.window;
      v.x = edges;
    }
    const total = T.regroup(buckets, edges, run.baseline);
    const bySource = state.stack === 'source';
    const layout = T.stackLayout(stacks, isTime ? 'time' : 'index', bySource ? state.stackSources : Infinity);
    const g = T.regroupStacked({ layers: layout.layers, count: sv.count }, width, edges);
    T.cumulative(g.layers).forEach((values, k) => {
      v.series.push({ run, kind: 'layer', layer: k, name: layout.names[k], rank: layout.rank[k], values, own: g.layers[k] });
    });
    v.names = layout.names;
    v.ranks = layout.rank;
    v.steadiness = layout.steadiness;
    v.sources = bySource ? { shown: layout.shown, available: layout.available } : null;
    v.series.push({ run, kind: 'total', values: total.hi });
    const reserved = reservedLine(run, isTime);
    if (reserved) v.series.push({ run, kind: 'reserved', values: T.regroupSteps(reserved, edges, total.last) });
    const simulated = run.whatif && reservedLine(run.whatif, isTime);
    if (simulated) v.series.push({ run, kind: 'whatif', values: T.regroupSteps(simulated, edges, total.last) });
    if (isTime && run.free) v.series.push({ run, kind: 'free', values: T.regroupSteps(run.free, edges, total.last) });
    const per = isTime ? `${formatMs(v.G / 1000)} ms per bucket` : `${formatCount(v.fineG)} event${v.fineG === 1 ? '' : 's'} per bucket`;
    v.note = `${STACK_NAMES[state.stack]}, ${per}: each bucket shows what was live at its highest point, so the layers add up to the max line. `
      + 'Absolute memory; the lowest layer is what was allocated before the trace began, then the steadiest layers (mean ÷ max over the run near 1: memory that stays), and what rises and falls on top.'
      + (bySource ? ` ${formatCount(layout.shown)} of the ${formatCount(layout.available)} sources this page holds have a layer of their own (Sources); the rest are other sources.` : '');
    if (!isTime && !hasTime()) v.note += ' No timestamps (time_us), so no wall-clock view.';
    v.note += whatifNote([run]);
    return v;
  }

  function buildView(zoom) {
    if (state.stack !== 'lines') return buildStackedView(zoom);
    const runs = RUNS.filter((r) => r.visible && (state.xMode === 'time' ? r.time : r.index));
    const v = { runs, x: [], series: [], note: '', warn: '', G: 0, fineG: 0, window: null };
    if (runs.length === 0) return v;
    const absolute = state.yMode === 'absolute';
    const few = runs.length <= MANY_RUNS; // reserved and free lines, legend values per run

    if (state.xMode === 'time') {
      const base = Math.max(...runs.map((r) => r.time.width));
      const span = Math.max(...runs.map((r) => r.timeSpanUs));
      const grid = T.timeGrid(base, span, state.precisionRequestedMs);
      const edges = grid.edges;
      v.G = grid.G;
      v.fineG = v.G;
      v.x = edges.map((e) => e / 1e6);
      state.precisionMs = v.G / 1000;
      v.note = `Wall clock, ${formatMs(v.G / 1000)} ms per bucket (min and max of each).`;
      if (!few && RUNS.some((r) => r.reserved || r.free)) v.note += ` Reserved and free memory are drawn for up to ${MANY_RUNS} runs at a time: hide runs (legend) to see them.`;
      v.warn = grid.warn;
      for (const run of runs) {
        const g = T.regroup(run.time, edges, absolute ? run.baseline : 0);
        v.series.push({ run, kind: 'max', values: g.hi });
        v.series.push({ run, kind: 'min', values: g.lo });
        if (absolute && run.reserved && few) v.series.push({ run, kind: 'reserved', values: T.regroupSteps(run.reserved, edges, g.last) });
        if (absolute && run.whatif && few) v.series.push({ run, kind: 'whatif', values: T.regroupSteps(run.whatif.reserved, edges, g.last) });
        if (absolute && run.free && few) v.series.push({ run, kind: 'free', values: T.regroupSteps(run.free, edges, g.last) });
      }
    } else {
      const base = Math.max(...runs.map((r) => r.index.width));
      const span = Math.max(...runs.map((r) => r.index.count * r.index.width));
      // Zoomed in: finer buckets inside the visible window, same budget.
      const grid = T.indexGrid(base, span, zoom);
      const edges = grid.edges;
      v.G = grid.G;
      v.fineG = grid.fineG;
      v.window = grid.window;
      v.x = edges;
      const per = (g) => `${formatCount(g)} event${g === 1 ? '' : 's'} per bucket`;
      v.note = `Event index, ${per(v.fineG)}${v.fineG !== v.G ? ' in the zoomed range' : ''} (min and max of each).`;
      if (!hasTime()) v.note += ` No timestamps (time_us), so no wall-clock view or markers${hasEventIndex() ? '' : ' and no drill-down'}.`;
      else if (RUNS.some((r) => r.steps.length || r.oom.length || r.annotations.length || r.free)) {
        v.note += ' Markers and free memory are drawn in the wall-clock view only.';
      }
      if (!few && RUNS.some((r) => r.reservedByEntry)) v.note += ` Reserved memory is drawn for up to ${MANY_RUNS} runs at a time: hide runs (legend) to see them.`;
      for (const run of runs) {
        const g = T.regroup(run.index, edges, absolute ? run.baseline : 0);
        v.series.push({ run, kind: 'max', values: g.hi });
        v.series.push({ run, kind: 'min', values: g.lo });
        if (absolute && run.reservedByEntry && few) v.series.push({ run, kind: 'reserved', values: T.regroupSteps(run.reservedByEntry, edges, g.last) });
        if (absolute && run.whatif && run.whatif.reservedByEntry && few) {
          v.series.push({ run, kind: 'whatif', values: T.regroupSteps(run.whatif.reservedByEntry, edges, g.last) });
        }
      }
    }
    if (!absolute && RUNS.some((r) => r.reserved || r.reservedByEntry)) {
      v.note += ' Reserved memory is shown in the absolute view only.';
    }
    if (absolute && few) v.note += whatifNote(runs);
    return v;
  }

  // A run's (or its simulated line's) reserved memory on the view's axis.
  function reservedLine(source, isTime) {
    return isTime ? source.reserved : source.reservedByEntry;
  }

  // What the dash-dot line is (plot --whatif), per run that has one, and
  // why a run that asked for one has none.
  function whatifNote(runs) {
    return runs.map((run) => {
      const w = run.whatif;
      if (!w) return run.whatifReason ? ` ${run.label}: no simulated line (${run.whatifReason}).` : '';
      return ` ${run.label}, dash-dot: reserved memory as memsnap's model of PyTorch's caching allocator has it under ${w.settings}`
        + ` (peak ${formatBytes(w.peak)}, the file's ${formatBytes(w.recordedPeak)}`
        + (w.modelOoms > 0 ? `; ${formatCount(w.modelOoms)} request${w.modelOoms === 1 ? '' : 's'} it could not serve within ${formatBytes(w.capacity)}` : '')
        + (w.exact ? ')' : '; under the file\'s own settings the model does not make every segment the file recorded)') + '.';
    }).join('');
  }

  // Event-index view: after a zoom, rebuild the buckets so the visible range
  // gets its own point budget; zooming back out restores the coarse grid.
  let refining = false;
  function refineIndexZoom(u, key) {
    if (key !== 'x' || refining || !view || state.xMode !== 'index') return;
    const { min, max } = u.scales.x;
    if (min == null || max == null) return;
    const next = buildView({ min, max });
    const same = next.fineG === view.fineG
      && (!next.window || (view.window && next.window.from === view.window.from && next.window.to === view.window.to));
    if (same) return;
    next.xMode = view.xMode;
    view = next;
    $('view-note').textContent = view.note;
    refining = true;
    try {
      // setData(.., false) would keep uPlot's cached visible index window
      // from the old arrays; reset, then restore the zoom.
      u.batch(() => {
        u.setData([view.x, ...view.series.map((s) => s.values)]);
        u.setScale('x', { min, max });
      });
    } finally {
      refining = false;
    }
  }

  // ---------------------------------------------------------------- chart

  const BIN_INCRS = (() => {
    const out = [];
    for (let u = 0; u < 6; u++) for (let m = 1; m < 1024; m *= 2) out.push(m * 1024 ** u);
    return out;
  })();

  function chartHeight() {
    return Math.round(Math.max(280, Math.min(520, window.innerHeight * 0.5)));
  }

  // ---- The view in the address's #fragment (view, run, axes, precision,
  // markers, sources), so that a link or a reload opens the same view; a
  // fragment is never sent anywhere, served or not. Values that do not fit
  // this page (a view it cannot draw, a run it does not have) are ignored.
  let pendingZoom = null; // the address's window, applied once the chart is drawn
  let pendingClick = null; // the address's clicked moment, drilled into once drawn

  function readViewFromAddress() {
    const saved = new URLSearchParams(location.hash.slice(1));
    const word = (key, allowed) => (allowed.includes(saved.get(key)) ? saved.get(key) : null);
    const number = (key) => (saved.has(key) ? Number(saved.get(key)) : NaN);
    const view = word('view', ['lines', 'category', 'source']);
    if (view && (view === 'lines' || hasStacks())) state.stack = view;
    const run = number('run');
    if (Number.isInteger(run) && run >= 0 && run < RUNS.length) state.stackRun = run;
    const x = word('x', ['time', 'index']);
    if (x && (x === 'index' || hasTime())) state.xMode = x;
    const y = word('y', ['absolute', 'delta']);
    if (y) state.yMode = y;
    const precision = number('precision');
    if (precision > 0 && Number.isFinite(precision)) state.precisionRequestedMs = precision;
    const sources = number('sources');
    if (Number.isInteger(sources) && sources >= 0) state.stackSources = sources;
    const flag = word('annotations', ['0', '1']);
    if (flag) state.showAnnotations = flag === '1';
    const steps = word('steps', ['0', '1']);
    if (steps) state.showSteps = steps === '1';
    const from = number('from');
    const to = number('to');
    if (Number.isFinite(from) && Number.isFinite(to) && to > from) pendingZoom = { min: from, max: to };
    const t = number('t');
    const e = number('e');
    if (t >= 0 && Number.isFinite(t)) pendingClick = { timeS: Math.round(t * 1e6) / 1e6 };
    else if (Number.isInteger(e) && e >= 0) pendingClick = { event: e };
  }

  // The address's clicked moment, as a click there would drill into it; one
  // the page cannot drill (another x axis, past the end) is left out.
  function replayClickFromAddress() {
    const click = pendingClick;
    pendingClick = null;
    if (!click) return;
    if (click.timeS != null && state.xMode === 'time' && hasTime()) {
      const t = Math.min(click.timeS, Math.max(...RUNS.map((r) => r.durationS)));
      drill({ timeS: t });
      showAllocator(t);
    } else if (click.event != null && state.xMode === 'index' && hasEventIndex()) {
      const maxEvents = Math.max(...RUNS.map((r) => Number(r.stats.event_count) || 0));
      if (click.event < maxEvents) drill({ event: click.event });
    }
  }

  // setScale hook: the x window when it is narrower than the data, else none.
  function rememberZoom(u, key) {
    if (key !== 'x') return;
    const { min, max } = u.scales.x;
    const d = u.data[0];
    const whole = min == null || max == null || !d.length || (min <= d[0] && max >= d[d.length - 1]);
    state.zoom = whole ? null : { min, max };
    writeViewToAddress();
  }

  function writeViewToAddress() {
    const view = new URLSearchParams({
      view: state.stack, run: String(state.stackRun), x: state.xMode, y: state.yMode,
      precision: String(state.precisionRequestedMs), sources: String(state.stackSources),
      annotations: state.showAnnotations ? '1' : '0', steps: state.showSteps ? '1' : '0',
    });
    if (state.zoom) {
      view.set('from', String(Number(state.zoom.min.toPrecision(12))));
      view.set('to', String(Number(state.zoom.max.toPrecision(12))));
    }
    if (state.clickedTime != null) view.set('t', String(state.clickedTime));
    else if (state.clickedEvent != null) view.set('e', String(state.clickedEvent));
    history.replaceState(null, '', `#${view}`);
  }

  function render() {
    const t0 = performance.now();
    writeViewToAddress();
    const chartEl = $('chart');
    let keepX = null;
    if (plot) {
      const sx = plot.scales.x;
      const d = plot.data[0];
      if (view && view.xMode === state.xMode && d.length && (sx.min > d[0] || sx.max < d[d.length - 1])) keepX = { min: sx.min, max: sx.max };
      plot.destroy();
      plot = null;
    }
    chartEl.textContent = '';
    view = buildView();
    view.xMode = state.xMode;
    $('view-note').textContent = view.note;
    $('precision-note').textContent = view.warn;
    $('precision').disabled = state.xMode !== 'time';
    $('y-mode').disabled = !!view.stacked;
    $('y-mode').title = view.stacked ? 'The stacked view always shows absolute memory' : '';
    $('stack-run-control').hidden = !view.stacked || RUNS.length < 2;
    const sourcesControl = !!view.stacked && state.stack === 'source' && !!view.sources;
    $('stack-sources-control').hidden = !sourcesControl;
    if (sourcesControl) {
      $('stack-sources').max = String(Math.max(1, view.sources.available));
      $('stack-sources').value = String(view.sources.shown);
    }
    info.stack = view.stacked
      ? { mode: state.stack, run: view.runs[0].ordinal, layers: view.names.slice(), steadiness: (view.steadiness || []).slice(), sources: view.sources || null }
      : null;
    // A file without ProfilerStep markers has nothing to show: unticked, disabled.
    const anySteps = RUNS.some((r) => r.steps.length > 0);
    $('show-steps').disabled = state.xMode !== 'time' || !anySteps;
    if (!anySteps) $('show-steps').checked = false;
    // Inferred iterations (no ProfilerStep marks: memsnap --steps) are named as such.
    const inferred = RUNS.filter((r) => r.steps.length > 0 && r.stepsSource && r.stepsSource.inferred === true);
    $('show-steps-label').textContent = inferred.length > 0 ? 'Steps (inferred)' : 'Profiler steps';
    $('show-steps').title = !anySteps
      ? 'No run has ProfilerStep annotations or optimizer steps to infer iterations from'
      : inferred.length > 0
        ? 'Iterations inferred from the optimizer (no ProfilerStep marks): ' +
          inferred.map((r) => r.label + ': ' + (r.stepsSource.kind === 'optimizer_annotations'
            ? "'" + String(r.stepsSource.from) + "' marks" : 'torch/optim frames')).join('; ')
        : '';
    $('show-annotations').disabled = state.xMode !== 'time';
    renderLegend();

    $('chart-hint').hidden = view.series.length === 0;
    $('chart-hint').textContent = state.xMode === 'time'
      ? 'Drag to zoom, double-click to reset. Click to list what was live at that moment.'
      : `Drag to zoom (the zoomed range gets finer buckets), double-click to reset.${hasEventIndex() ? ' Click to list what was live after that event.' : ''}`;
    if (view.series.length === 0) {
      const empty = document.createElement('div');
      empty.className = 'empty';
      empty.textContent = RUNS.length === 0
        ? 'No runs in this file.'
        : 'No trace events to plot (the snapshot has no allocation history for this device).';
      chartEl.appendChild(empty);
      info.renderMs = performance.now() - t0;
      window.memsnapPlot = null;
      return;
    }

    const stepped = uPlot.paths.stepped({ align: 1 });
    const series = [{ label: state.xMode === 'time' ? 'time (s)' : 'event' }];
    const bands = [];
    const data = [view.x];
    view.series.forEach((s, i) => {
      const idx = i + 1;
      const c = s.run.color;
      const base = { scale: 'y', paths: stepped, points: { show: false }, spanGaps: false };
      if (s.kind === 'layer') {
        // Layer 0 fills down to zero; each later one fills down to the one below.
        const fill = withAlpha(layerColor(s.name, s.rank), 0.75);
        series.push({ ...base, label: s.name, stroke: withAlpha(layerColor(s.name, s.rank), 1), width: 0.5, ...(s.layer === 0 ? { fill } : {}) });
        if (s.layer > 0) bands.push({ series: [idx, idx - 1], fill });
      } else if (s.kind === 'total') series.push({ ...base, label: `${s.run.label} (max)`, stroke: '#111827', width: 1.5 });
      else if (s.kind === 'max') series.push({ ...base, label: `${s.run.label} (max)`, stroke: c, width: 1.6 });
      else if (s.kind === 'min') {
        series.push({ ...base, label: `${s.run.label} (min)`, stroke: withAlpha(c, 0.55), width: 1 });
        bands.push({ series: [idx - 1, idx], fill: withAlpha(c, 0.16) });
      } else if (s.kind === 'free') series.push({ ...base, label: `${s.run.label} (free in segments)`, stroke: withAlpha(c, 0.8), width: 1, dash: [2, 3] });
      else if (s.kind === 'whatif') series.push({ ...base, label: `${s.run.label} (reserved under ${s.run.whatif.settings})`, stroke: c, width: 1.5, dash: [10, 3, 2, 3] });
      else series.push({ ...base, label: `${s.run.label} (reserved)`, stroke: c, width: 1.25, dash: [6, 4] });
      data.push(s.values);
    });

    const xIsTime = state.xMode === 'time';
    const opts = {
      width: Math.max(320, chartEl.clientWidth),
      height: chartHeight(),
      series,
      bands,
      legend: { show: false },
      cursor: {
        points: { show: false },
        drag: { x: true, y: false, setScale: true },
        focus: { prox: -1 },
      },
      scales: { x: { time: false }, y: { range: (u, min, max) => T.yRange(min, max) } },
      axes: [
        {
          label: xIsTime ? 'seconds from trace start' : 'event index',
          labelSize: 20,
          stroke: '#5f6b76',
          grid: { stroke: '#eef0f3', width: 1 },
          ticks: { stroke: '#dde1e6', width: 1 },
          // Whole events only in the event-index view, nothing finer than 1 µs
          // in wall clock; never the same label twice (a one-event trace).
          incrs: T.tickIncrs(xIsTime ? 'time' : 'index'),
          space: xIsTime ? 64 : 50, // px between ticks: "0.00015"-wide labels stay apart
          values: (u, splits, ai, space, incr) => {
            const labels = T.formatTicks(splits, incr, xIsTime ? 'time' : 'index');
            info.xTicks = labels;
            return labels;
          },
        },
        {
          label: state.yMode === 'absolute' ? 'memory (baseline + delta)' : 'memory delta from trace start',
          labelSize: 20,
          stroke: '#5f6b76',
          size: 78,
          incrs: BIN_INCRS,
          grid: { stroke: '#eef0f3', width: 1 },
          ticks: { stroke: '#dde1e6', width: 1 },
          values: (u, splits) => splits.map(formatAxisBytes),
        },
      ],
      hooks: {
        draw: [drawMarkers],
        setCursor: [updateReadout],
        setScale: [refineIndexZoom, rememberZoom, scheduleBandCharts],
      },
    };
    plot = new uPlot(opts, data, chartEl);
    if (keepX) {
      plot.setScale('x', keepX);
    } else if (pendingZoom) {
      plot.setScale('x', pendingZoom);
    }
    pendingZoom = null;
    window.memsnapPlot = plot;
    info.renderMs = performance.now() - t0;
    updateReadout(plot);
    scheduleBandCharts();
  }

  // Steps, annotations, OOMs and the clicked time, drawn on the canvas after the series.
  function drawMarkers(u) {
    const marks = { steps: 0, annotations: 0, oom: 0 };
    info.markers = marks;
    if (!view) return;
    if (state.xMode !== 'time') {
      // Event index: only the clicked event (its step spans [e, e + 1)).
      if (state.clickedEvent != null) drawClickLine(u, state.clickedEvent + 0.5);
      return;
    }
    const ctx = u.ctx;
    const dpr = window.devicePixelRatio || 1;
    const { left, top, width, height } = u.bbox;
    const xMin = u.scales.x.min;
    const xMax = u.scales.x.max;
    const px = (v) => u.valToPos(v, 'x', true);
    // With many runs, one run's step ruler and annotation lanes (the
    // highlighted one, else the first); OOM lines stay for every run.
    const runs = view.runs.length > MANY_RUNS
      ? view.runs.filter((r) => r.ordinal === (info.highlighted ?? view.runs[0].ordinal)).slice(0, 1)
      : view.runs;
    ctx.save();
    ctx.beginPath();
    ctx.rect(left, top, width, height);
    ctx.clip();
    ctx.textBaseline = 'top';
    ctx.textAlign = 'left'; // uPlot leaves its own alignment and dash behind
    ctx.setLineDash([]);
    ctx.font = `${11 * dpr}px system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif`;

    // Profiler steps: a ruler strip per run along the top (alternating shades,
    // step numbers) and a faint dashed boundary line through the plot.
    const rulerH = 13 * dpr;
    if (state.showSteps) {
      runs.forEach((run, k) => {
        const y = top + k * rulerH;
        let lastLabel = -Infinity;
        run.steps.forEach((s, i) => {
          const x0 = s.start_s == null ? NaN : Number(s.start_s);
          const x1 = s.end_s == null ? run.durationS : Number(s.end_s);
          if (!Number.isFinite(x0) || x1 < xMin || x0 > xMax) return;
          const p0 = px(x0);
          const p1 = px(Math.max(x0, x1));
          marks.steps += 1;
          ctx.fillStyle = withAlpha(run.color, i % 2 === 0 ? 0.1 : 0.2);
          ctx.fillRect(p0, y, Math.max(dpr, p1 - p0), rulerH - dpr);
          ctx.strokeStyle = withAlpha(run.color, 0.4);
          ctx.lineWidth = dpr;
          ctx.setLineDash([4 * dpr, 4 * dpr]);
          ctx.beginPath();
          ctx.moveTo(Math.round(p0) + 0.5, y + rulerH);
          ctx.lineTo(Math.round(p0) + 0.5, top + height);
          ctx.stroke();
          ctx.setLineDash([]);
          const label = `#${s.step}`;
          const lx = Math.max(p0, left) + 3 * dpr;
          if (lx - lastLabel > 30 * dpr && ctx.measureText(label).width + 6 * dpr < p1 - Math.max(p0, left)) {
            ctx.fillStyle = withAlpha(run.color, 1);
            ctx.fillText(label, lx, y + dpr);
            lastLabel = lx;
          }
        });
      });
    }

    if (state.showAnnotations) {
      const laneH = 11 * dpr;
      const lanes = 3;
      ctx.font = `${9 * dpr}px system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif`;
      runs.forEach((run, k) => {
        const laneTop = top + height - (runs.length - k) * lanes * laneH - 2 * dpr;
        run.annotations.forEach((a, i) => {
          const x0 = a.start_s == null ? NaN : Number(a.start_s);
          const x1 = a.end_s == null ? run.durationS : Number(a.end_s);
          if (!Number.isFinite(x0) || x1 < xMin || x0 > xMax) return;
          marks.annotations += 1;
          const p0 = px(x0);
          const w = Math.max(dpr, px(Math.max(x0, x1)) - p0);
          const y = laneTop + Math.min(run.annotationDepth[i], lanes - 1) * laneH;
          ctx.fillStyle = withAlpha(run.color, 0.28);
          ctx.fillRect(p0, y, w, laneH - dpr);
          ctx.strokeStyle = withAlpha(run.color, 0.8);
          ctx.lineWidth = dpr;
          ctx.strokeRect(p0 + 0.5, y + 0.5, w - 1, laneH - 2 * dpr);
          const name = String(a.name);
          if (w > 24 * dpr) {
            const tw = ctx.measureText(name).width;
            if (tw + 6 * dpr < w) {
              ctx.fillStyle = '#1f2328';
              ctx.fillText(name, p0 + 3 * dpr, y + dpr);
            }
          }
        });
      });
    }

    // Out-of-memory: always drawn.
    ctx.font = `600 ${11 * dpr}px system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif`;
    view.runs.forEach((run, k) => {
      run.oom.forEach((o) => {
        const t = o.t_s == null ? NaN : Number(o.t_s);
        if (!Number.isFinite(t) || t < xMin || t > xMax) return;
        marks.oom += 1;
        const p = Math.round(px(t)) + 0.5;
        ctx.strokeStyle = OOM_COLOR;
        ctx.lineWidth = 2 * dpr;
        ctx.beginPath();
        ctx.moveTo(p, top);
        ctx.lineTo(p, top + height);
        ctx.stroke();
        const label = `OOM ${view.runs.length > 1 ? `(${run.name}) ` : ''}requested ${formatBytes(Number(o.requested))}`;
        const tw = ctx.measureText(label).width;
        const y = top + (state.showSteps ? runs.length * rulerH : 0) + (4 + 16 * (k % 8)) * dpr;
        const x = p + 4 * dpr + tw > left + width ? p - 4 * dpr - tw : p + 4 * dpr;
        ctx.fillStyle = 'rgba(255, 255, 255, 0.85)';
        ctx.fillRect(x - 2 * dpr, y - dpr, tw + 4 * dpr, 14 * dpr);
        ctx.fillStyle = OOM_COLOR;
        ctx.fillText(label, x, y);
      });
    });

    ctx.restore();
    if (state.clickedTime != null) drawClickLine(u, state.clickedTime);
  }

  function drawClickLine(u, x) {
    if (!(x >= u.scales.x.min && x <= u.scales.x.max)) return;
    const ctx = u.ctx;
    const dpr = window.devicePixelRatio || 1;
    const { top, height } = u.bbox;
    const p = Math.round(u.valToPos(x, 'x', true)) + 0.5;
    ctx.save();
    ctx.strokeStyle = CLICK_COLOR;
    ctx.lineWidth = dpr;
    ctx.setLineDash([2 * dpr, 2 * dpr]);
    ctx.beginPath();
    ctx.moveTo(p, top);
    ctx.lineTo(p, top + height);
    ctx.stroke();
    ctx.restore();
  }

  // ---------------------------------------------------------------- legend and readout

  function renderLegend() {
    const el = $('legend');
    if (view && view.stacked) {
      // Top layer first, as the bands read from the top down.
      const items = [];
      for (let k = view.names.length - 1; k >= 0; k--) {
        const name = view.names[k];
        items.push(`<span class="legend-item layer" data-layer="${k}" style="--run-color:${layerColor(name, view.ranks[k])}" title="${esc(name)}">`
          + `<span class="swatch block"></span><span class="legend-label" data-label="${esc(name)}">${esc(name)}</span>`
          + `<span class="legend-value" id="legend-layer-${k}"></span></span>`);
      }
      const run = view.runs[0];
      if (run.whatif && reservedLine(run.whatif, state.xMode === 'time')) {
        items.unshift(`<span class="legend-item layer" style="--run-color:#111827" title="${esc(whatifTitle(run))}">`
          + `<span class="swatch dashdot"></span><span class="legend-sub">reserved under ${esc(run.whatif.settings)}</span>`
          + `<span class="legend-value" id="legend-whatif-${run.ordinal}"></span></span>`);
      }
      items.unshift(`<span class="legend-item layer total" style="--run-color:#111827" title="${esc(fullName(run))}">`
        + `<span class="swatch"></span><span class="legend-label" data-label="${esc(run.label)}">${esc(run.name)} (max)</span>`
        + `<span class="legend-value" id="legend-total"></span></span>`);
      el.innerHTML = items.join('');
      return;
    }
    const isTime = state.xMode === 'time';
    const showReserved = state.yMode === 'absolute';
    let groups = '';
    if (RUNS.length > MANY_RUNS) {
      groups = '<div class="legend-groups" title="runs whose absolute peaks lie within 1% of each other; click to hide or show a group">'
        + info.groups.map((g, k) => {
          const shown = g.members.some((o) => RUNS[o].visible);
          const peak = g.peakMin === g.peakMax ? formatBytes(g.peakMax) : `${formatBytes(g.peakMin)}–${formatBytes(g.peakMax)}`;
          return `<span class="legend-group${shown ? '' : ' off'}" data-group="${k}">${esc(peak)} × ${g.members.length}</span>`;
        }).join('')
        + '<span class="legend-group all" data-group="all">all</span></div>';
    }
    const few = RUNS.filter((r) => r.visible).length <= MANY_RUNS;
    el.classList.toggle('many', !few);
    el.innerHTML = groups + RUNS.map((run) => {
      const reserved = reservedLine(run, isTime) && showReserved && few
        ? `<span class="swatch dashed"></span><span class="legend-sub">reserved</span><span class="legend-value" id="legend-reserved-${run.ordinal}"></span>` : '';
      const whatif = run.whatif && reservedLine(run.whatif, isTime) && showReserved && few
        ? `<span class="swatch dashdot"></span><span class="legend-sub" title="${esc(whatifTitle(run))}">under ${esc(run.whatif.settings)}</span><span class="legend-value" id="legend-whatif-${run.ordinal}"></span>` : '';
      const free = run.free && isTime && showReserved && few
        ? `<span class="swatch dotted"></span><span class="legend-sub" title="reserved memory no block holds (the bucket's highest), and the largest free block at the nearest earlier sample">free in segments</span><span class="legend-value" id="legend-free-${run.ordinal}"></span>` : '';
      return `<span class="legend-item${run.visible ? '' : ' off'}" data-run="${run.ordinal}" style="--run-color:${run.color}" title="${esc(fullName(run))}\n(click to hide or show)">`
        + `<span class="swatch"></span><span class="legend-label" data-label="${esc(run.label)}">${esc(run.name)}</span>`
        + `<span class="legend-value" id="legend-value-${run.ordinal}"></span>${reserved}${whatif}${free}</span>`;
    }).join('');
  }

  function whatifTitle(run) {
    return `reserved memory as memsnap's model of PyTorch's caching allocator has it under ${run.whatif.settings}, `
      + `from the allocator's state at the trace's first entry (memsnap whatif FILE --set ${run.whatif.settings})`;
  }

  function updateReadout(u) {
    const out = $('cursor-readout');
    const idx = u.cursor.idx;
    for (const run of RUNS) {
      for (const id of [`legend-value-${run.ordinal}`, `legend-reserved-${run.ordinal}`, `legend-whatif-${run.ordinal}`, `legend-free-${run.ordinal}`]) {
        const el = $(id);
        if (el) el.textContent = '';
      }
    }
    if (idx == null || !view) {
      out.textContent = '';
      return;
    }
    const xs = u.data[0];
    const x = xs[idx];
    if (view.stacked) {
      view.series.forEach((s) => {
        const el = s.kind === 'layer' ? $(`legend-layer-${s.layer}`) : s.kind === 'total' ? $('legend-total')
          : s.kind === 'whatif' ? $(`legend-whatif-${s.run.ordinal}`) : null;
        const value = s.kind === 'layer' ? s.own[idx] : s.values[idx];
        if (el && value != null) el.textContent = value < 0 ? formatSignedBytes(value) : formatBytes(value);
      });
    }
    const parts = new Map();
    view.series.forEach((s, i) => {
      const v = u.data[i + 1][idx];
      if (v == null || view.stacked) return;
      const p = parts.get(s.run) || {};
      p[s.kind] = v;
      parts.set(s.run, p);
    });
    for (const [run, p] of parts) {
      const el = $(`legend-value-${run.ordinal}`);
      if (el && p.max != null) {
        const f = p.max < 0 || p.min < 0 || state.yMode === 'delta' ? formatSignedBytes : formatBytes;
        el.textContent = p.max === p.min ? f(p.max) : `${f(p.min)} – ${f(p.max)}`;
      }
      const er = $(`legend-reserved-${run.ordinal}`);
      if (er && p.reserved != null) er.textContent = formatBytes(p.reserved);
      const ew = $(`legend-whatif-${run.ordinal}`);
      if (ew && p.whatif != null) ew.textContent = formatBytes(p.whatif);
      const ef = $(`legend-free-${run.ordinal}`);
      if (ef && p.free != null) {
        const largest = T.stepValueAt(run.largestFree, x * 1e6);
        ef.textContent = formatBytes(p.free) + (largest != null ? ` (largest block ${formatBytes(largest)})` : '');
      }
    }
    let text = state.xMode === 'time'
      ? `t = ${x.toFixed(decimalsFor(view.G / 1e6))} s`
      : indexReadout(xs, idx);
    if (state.xMode === 'time' && state.showAnnotations) {
      const names = [];
      for (const run of view.runs) {
        for (const a of run.annotations) {
          const end = a.end_s == null ? run.durationS : a.end_s;
          if (a.start_s != null && a.start_s <= x && x <= end) names.push(a.name);
          if (names.length > 4) break;
        }
      }
      if (names.length) text += ` · ${names.slice(0, 4).join(', ')}${names.length > 4 ? ', …' : ''}`;
    }
    out.textContent = text;
  }

  // The events of the bucket under the cursor; the closing entry past the
  // last bucket repeats that bucket, so it reads as that bucket too.
  function indexReadout(xs, idx) {
    const i = idx === xs.length - 1 && idx > 0 ? idx - 1 : idx;
    const maxEvents = Math.max(...view.runs.map((r) => Number(r.stats.event_count) || 0));
    const from = Math.ceil(xs[i]);
    const to = Math.max(from, Math.min(Math.ceil(xs[i + 1] ?? xs[i] + 1), maxEvents) - 1);
    return from === to ? `event ${formatCount(from)}` : `events ${formatCount(from)} – ${formatCount(to)}`;
  }

  // ---------------------------------------------------------------- cards

  function card(run) {
    const s = run.stats;
    const oom = run.oom.length
      ? `<dt>OOM</dt><dd class="oom-flag">${run.oom.length} × requested ${esc(run.oom.map((o) => formatBytes(Number(o.requested))).slice(0, 2).join(', '))}${run.oom.length > 2 ? ', …' : ''}</dd>`
      : '';
    const duration = s.has_time ? ` over ${T.formatDuration(Number(s.duration_s))}` : ' (no timestamps)';
    return `<div class="card" data-run="${run.ordinal}" style="--run-color:${run.color}">
      <div class="card-title"><span class="name" title="${esc(fullName(run))}">${esc(run.name)}</span><span class="sub">device ${esc(run.device ?? '?')}</span></div>
      <dl>
        <dt>Absolute peak</dt><dd class="big" data-stat="absolute_peak">${formatBytes(Number(s.absolute_peak))}</dd>
        <dt>Baseline</dt><dd data-stat="baseline">${formatBytes(Number(s.baseline))}</dd>
        <dt>Peak delta</dt><dd data-stat="peak_delta">${formatSignedBytes(Number(s.peak_delta))}</dd>
        <dt>Allocations</dt><dd data-stat="alloc_count">${formatCount(Number(s.alloc_count))}</dd>
        <dt>Unmatched frees</dt><dd data-stat="unmatched_frees">${formatCount(Number(s.unmatched_frees))} (${formatBytes(Number(s.unmatched_free_bytes) || 0)})</dd>
        <dt>Events</dt><dd>${formatCount(Number(s.event_count))}${duration}</dd>
        ${oom}
      </dl>
    </div>`;
  }

  function diffCell(value, bytes, stat) {
    const cls = value > 0 ? 'pos' : value < 0 ? 'neg' : '';
    return `<dd class="${cls}${stat === 'absolute_peak' ? ' big' : ''}" data-stat="${stat}">${bytes ? formatSignedBytes(value) : formatSignedCount(value)}</dd>`;
  }

  function diffCard(a, b) {
    const d = (k) => (Number(b.stats[k]) || 0) - (Number(a.stats[k]) || 0);
    return `<div class="card diff" data-run="diff">
      <div class="card-title"><span class="name">B − A</span><span class="sub" title="${esc(b.label)} minus ${esc(a.label)}">${esc(b.name)} − ${esc(a.name)}</span></div>
      <dl>
        <dt>Absolute peak</dt>${diffCell(d('absolute_peak'), true, 'absolute_peak')}
        <dt>Baseline</dt>${diffCell(d('baseline'), true, 'baseline')}
        <dt>Peak delta</dt>${diffCell(d('peak_delta'), true, 'peak_delta')}
        <dt>Allocations</dt>${diffCell(d('alloc_count'), false, 'alloc_count')}
        <dt>Unmatched frees</dt>${diffCell(d('unmatched_frees'), false, 'unmatched_frees')}
        <dt>Events</dt>${diffCell(d('event_count'), false, 'event_count')}
      </dl>
    </div>`;
  }

  // Many runs: one table, highest absolute peak first, instead of a card each.
  function runTable() {
    const rows = RUNS.slice().sort((a, b) => Number(b.stats.absolute_peak) - Number(a.stats.absolute_peak) || a.ordinal - b.ordinal);
    const peaks = rows.map((r) => Number(r.stats.absolute_peak));
    const median = peaks[Math.floor(peaks.length / 2)];
    const body = rows.map((run) => {
      const s = run.stats;
      return `<tr data-run="${run.ordinal}" style="--run-color:${run.color}"><td class="src"><span class="swatch"></span> <span title="${esc(fullName(run))}">${esc(run.name)}</span></td>`
        + `<td data-stat="absolute_peak">${formatBytes(Number(s.absolute_peak))}</td><td>${formatBytes(Number(s.baseline))}</td>`
        + `<td>${formatSignedBytes(Number(s.peak_delta))}</td><td>${formatCount(Number(s.alloc_count))}</td><td>${run.oom.length || ''}</td></tr>`;
    }).join('');
    return `<details class="panel run-table"><summary>${RUNS.length} runs: highest absolute peak ${formatBytes(peaks[0])} (${esc(rows[0].name)}), median ${formatBytes(median)}, lowest ${formatBytes(peaks[peaks.length - 1])} (${esc(rows[rows.length - 1].name)}); the table</summary>`
      + `<div class="table-scroll"><table><thead><tr><th class="src">run</th><th>absolute peak</th><th>baseline</th><th>peak delta</th><th>allocations</th><th>oom</th></tr></thead><tbody>${body}</tbody></table></div></details>`;
  }

  function renderCards() {
    if (RUNS.length > MANY_RUNS) {
      $('cards').innerHTML = runTable();
      $('cards').classList.add('many');
      return;
    }
    let html = RUNS.map(card).join('');
    if (RUNS.length === 2) html += diffCard(RUNS[0], RUNS[1]);
    $('cards').innerHTML = html;
  }

  // Brings one run's lines forward and dims the others (null: all as drawn).
  function highlightRun(ordinal) {
    if (info.highlighted === ordinal || !plot || !view || view.stacked) return;
    info.highlighted = ordinal;
    view.series.forEach((s, i) => {
      plot.series[i + 1].alpha = ordinal == null || s.run.ordinal === ordinal ? 1 : 0.12;
    });
    plot.redraw(false, false);
  }

  // ---------------------------------------------------------------- drill-down

  // A drill-down at wall-clock time `timeS` (seconds from each run's trace
  // start) or, in the event-index view, after event `event` (0-based, each
  // run's own trace): { timeS } or { event }.
  // ---- Search and one allocation's stack: only when `memsnap serve` serves
  // the page (its address carries the token every request needs). A page
  // opened as a file makes no request at all.
  const SERVED = /^https?:$/.test(location.protocol)
    && new URLSearchParams(location.search).has('token');

  async function askServer(route, params) {
    const query = new URLSearchParams(params);
    query.set('token', new URLSearchParams(location.search).get('token'));
    const response = await fetch(`${route}?${query}`, { cache: 'no-store' });
    const body = await response.json();
    if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
    return body;
  }

  function element(tag, text, className) {
    const node = document.createElement(tag);
    if (text !== undefined) node.textContent = text;
    if (className) node.className = className;
    return node;
  }

  // Frames innermost first; runs of frames that are not the user's folded
  // into one <details>, so the user's lines stand out and the rest stays
  // one click away.
  function framesList(frames) {
    const list = element('ol');
    let folded = null;
    frames.forEach((f, i) => {
      const item = element('li', `${f.name} ${f.filename}:${f.line}`, f.users ? 'users' : '');
      item.value = i + 1;
      if (f.users) {
        folded = null;
        list.append(item);
        return;
      }
      if (!folded) {
        const details = element('details');
        details.append(element('summary', ''), element('ol'));
        list.append(details);
        folded = details;
      }
      folded.querySelector('ol').append(item);
      const n = folded.querySelector('ol').children.length;
      folded.querySelector('summary').textContent = `${n} library frame${n === 1 ? '' : 's'}`;
    });
    return list;
  }

  async function showAllocation(run, entry, box = $('allocation-detail')) {
    box.hidden = false;
    box.replaceChildren(element('p', `Asking for entry ${entry}...`, 'hint'));
    try {
      renderAllocationDetail(box, await allocationDetail(run, entry));
    } catch (err) {
      box.replaceChildren(element('p', String(err.message || err), 'error'));
    }
  }

  // An allocation in full (GET /api/allocation): facts, then its stack and
  // the stack of what ended it.
  function renderAllocationDetail(box, a) {
    box.hidden = false;
    const when = a.time_s === null ? '' : ` at ${a.time_s.toFixed(6)} s`;
    const end = a.end === null ? 'live at the end of the trace'
      : `${a.end.replaced ? 'replaced by the alloc' : 'freed'} at entry ${a.end.entry}`
        + (a.end.time_s === null ? '' : ` (${a.end.time_s.toFixed(6)} s)`);
    const facts = element('p', `${formatBytes(a.size)} at 0x${a.address.toString(16)}, stream ${a.stream}, `
      + `entry ${a.entry}${when}; ${a.category}; ${end}`, 'facts');
    const parts = [element('h3', a.source), facts, element('h4', 'Allocated at'), framesList(a.frames)];
    if (a.end && a.end.frames.length) parts.push(element('h4', 'Ended at'), framesList(a.end.frames));
    box.replaceChildren(...parts);
    box.dataset.entry = String(a.entry);
  }

  async function runSearch(event) {
    event.preventDefault();
    const run = Number($('search-run').value);
    const q = $('search-text').value.trim();
    if (!q) return;
    const summary = $('search-summary');
    const table = $('search-results');
    const body = table.querySelector('tbody');
    try {
      const found = await askServer('/api/search', { file: run, q });
      allocView.search = { run, q };
      allocView.refresh();
      summary.textContent = `${formatCount(found.count)} allocation${found.count === 1 ? '' : 's'}, `
        + `${formatBytes(found.bytes)}${found.count > found.rows.length ? ` (the first ${found.rows.length} listed)` : ''}`;
      summary.dataset.count = String(found.count);
      body.replaceChildren(...found.rows.map((r) => {
        const row = element('tr');
        row.dataset.entry = String(r.entry);
        row.append(element('td', String(r.entry), 'num'), element('td', formatBytes(r.size), 'num'),
          element('td', r.time_s === null ? '-' : r.time_s.toFixed(6), 'num'), element('td', r.source));
        row.addEventListener('click', () => {
          body.querySelectorAll('tr.selected').forEach((x) => x.classList.remove('selected'));
          row.classList.add('selected');
          showAllocation(run, r.entry);
        });
        return row;
      }));
      table.hidden = found.rows.length === 0;
    } catch (err) {
      summary.textContent = String(err.message || err);
      summary.dataset.count = '';
      table.hidden = true;
    }
  }

  function wireSearch() {
    if (!SERVED) return;
    $('search-panel').hidden = false;
    $('search-run').replaceChildren(...RUNS.map((r, i) => {
      const option = element('option', r.name || r.label);
      option.value = String(i);
      return option;
    }));
    $('search-run').hidden = RUNS.length < 2;
    $('search-form').addEventListener('submit', runSearch);
  }

  function drill(at) {
    const t0 = performance.now();
    const byEvent = at.event != null;
    const runs = RUNS;
    // A run with moments snaps to its nearest one; with one run the click's
    // time becomes that moment's, so the heading and replay-to-time agree.
    const live = byEvent
      ? runs.map((r) => T.liveAtEvent(r.life, r.sources, at.event))
      : runs.map((r) => (r.moments
        ? T.liveAtMoment(r.moments, r.sources, Math.round(at.timeS * 1e6))
        : T.liveAt(r.life, r.sources, Math.round(at.timeS * 1e6))));
    if (!byEvent && live.length > 0 && live.every((l) => l.momentUs != null && l.momentUs === live[0].momentUs)) {
      at = { timeS: live[0].momentUs / 1e6, snapped: true };
    }
    // What the line counts beside those allocations (memory from before the
    // trace, reused addresses), at the same moment, so the table adds up to it.
    live.forEach((l, r) => {
      const run = runs[r];
      if (!l) return;
      if (byEvent) l.unlisted = T.unlistedAt(run.unlisted, at.event, true);
      else if (!run.time) l.unlisted = T.unlistedAt(null, 0);
      else l.unlisted = T.unlistedAt(run.unlisted, l.momentUs != null ? l.momentUs : Math.round(at.timeS * 1e6));
    });
    const rows = T.liveRows(live);
    const unlistedRows = T.liveRows(live, (l) => l.unlisted && l.unlisted.bySource);
    renderDrill(at, live, rows, unlistedRows);
    state.clickedTime = byEvent ? null : at.timeS;
    state.clickedEvent = byEvent ? at.event : null;
    info.drilldownMs = performance.now() - t0;
    document.body.dataset.drilldownMs = info.drilldownMs.toFixed(1);
    writeViewToAddress();
    if (byEvent) {
      document.body.dataset.clickedEvent = String(at.event);
      delete document.body.dataset.clickedTime;
    } else {
      document.body.dataset.clickedTime = String(at.timeS);
      delete document.body.dataset.clickedEvent;
    }
    if (plot) plot.redraw(false, false);
  }

  // The summary of one run's drill-down: the allocations listed, what the
  // line counts beside them, and the sum, which is the line's absolute value.
  function drillSummary(l) {
    const unlisted = l.unlisted || { bySource: new Map(), bytes: 0 };
    const reused = (unlisted.bySource.get(REUSED_ROW) || { bytes: 0 }).bytes;
    const before = unlisted.bytes - reused;
    const parts = [`${formatCount(l.liveCount)} live allocations, ${formatBytes(l.liveBytes)}`];
    const bytes = (v) => (v < 0 ? `−${formatBytes(-v)}` : formatBytes(v));
    if (before !== 0 || unlisted.bySource.size > (reused !== 0 ? 1 : 0)) parts.push(`${bytes(before)} allocated before the trace`);
    if (reused !== 0) parts.push(`${formatBytes(reused)} at addresses reused without a free`);
    return parts.length > 1 ? `${parts.join(' + ')} = ${bytes(l.liveBytes + unlisted.bytes)}` : parts[0];
  }

  function renderDrill(at, live, rows, unlistedRows) {
    const runs = RUNS;
    const two = runs.length === 2;
    const byEvent = at.event != null;
    $('drill-heading').textContent = byEvent
      ? `Live allocations by source after event ${formatCount(at.event)}`
      : `Live allocations by source at t = ${formatSeconds(at.timeS)}`;
    const momentRuns = runs.filter((r) => r.moments);
    const snapNote = momentRuns.length === 0 || byEvent ? ''
      : at.snapped
        ? ` The click snapped to t = ${formatSeconds(at.timeS)}, the nearest of ${formatCount(momentRuns[0].moments.count)} moments this page keeps (the run has more allocations than plot --max-lifetimes embeds one by one); memsnap replay-to-time --time ${at.timeS} gives the same.`
        : ` Runs with many allocations snap to their nearest kept moment: ${momentRuns.map((r) => `${r.name} at t = ${formatSeconds(live[runs.indexOf(r)].momentUs / 1e6)}`).join(', ')}.`;
    const unlistedNote = unlistedRows.length === 0 ? ''
      : ' The first rows are what the line counts beside the trace\'s allocations: memory allocated before the trace, named as memsnap explain names it (by the dump\'s blocks, else by the free that released it), less what was freed since, and allocations at addresses reused without a free. The summary and the rows add up to the line (absolute).';
    $('drill-hint').textContent = (two
      ? `Sorted by |B − A|. Each run is replayed to the same ${byEvent ? 'event index in' : 'number of seconds after the start of'} its own trace.`
      : 'Sorted by bytes. Click elsewhere on the chart to move.') + unlistedNote + snapNote;
    $('drill-summary').innerHTML = runs.map((run, r) => {
      const l = live[r];
      const events = Number(run.stats.event_count) || 0;
      const past = (byEvent ? at.event >= events : run.time && at.timeS > run.durationS) ? ' (after the end of its trace)' : '';
      const noTime = byEvent || run.time ? '' : ' (no timestamps: not available)';
      const unlistedBytes = l.unlisted ? l.unlisted.bytes : 0;
      return `<span class="drill-run" data-run="${r}" data-live-count="${l.liveCount}" data-live-bytes="${l.liveBytes}" data-unlisted-bytes="${unlistedBytes}" data-total-bytes="${l.liveBytes + unlistedBytes}" style="--run-color:${run.color}" title="${esc(fullName(run))}">`
        + `<span class="swatch"></span><b>${esc(run.name)}</b> <span>${drillSummary(l)}${past}${noTime}</span></span>`;
    }).join('');
    const table = $('drilldown');
    const head = ['<tr><th class="src">Source</th>'];
    runs.forEach((run) => {
      head.push(`<th title="${esc(fullName(run))}">${esc(run.name)} bytes</th><th>count</th>`);
    });
    if (two) head.push('<th>B − A</th>');
    head.push('</tr>');
    table.tHead.innerHTML = head.join('');
    const body = [];
    const columns = 1 + runs.length * 2 + (two ? 1 : 0);
    const bytesText = (b) => (b < 0 ? `−${formatBytes(-b)}` : formatBytes(b));
    const addRow = (row, unlisted) => {
      let attrs = ` data-source="${esc(row.source)}"${unlisted ? ' data-unlisted="1"' : ''}`;
      let cells = `<td class="src">${esc(row.source)}</td>`;
      row.bytes.forEach((b, r) => {
        attrs += ` data-bytes-${r}="${b}" data-count-${r}="${row.count[r]}"`;
        cells += `<td class="${b === 0 ? 'zero' : ''}" title="${b} bytes">${bytesText(b)}</td><td class="${row.count[r] === 0 ? 'zero' : ''}">${formatCount(row.count[r])}</td>`;
      });
      if (runs.length === 1) attrs += ` data-bytes="${row.bytes[0]}"`;
      if (two) {
        const d = row.bytes[1] - row.bytes[0];
        attrs += ` data-delta="${d}"`;
        cells += `<td class="${d > 0 ? 'pos' : d < 0 ? 'neg' : 'zero'}" title="${d} bytes">${formatSignedBytes(d)}</td>`;
      }
      body.push(`<tr${attrs}${unlisted ? ' class="unlisted"' : ''}>${cells}</tr>`);
    };
    // The few rows the trace's allocations leave out come first, under their
    // own heading, so that the long list below never hides them.
    if (unlistedRows.length > 0) {
      const what = [];
      if (unlistedRows.some((row) => row.source !== REUSED_ROW)) what.push('memory allocated before the trace, less what was freed since');
      if (unlistedRows.some((row) => row.source === REUSED_ROW)) what.push('allocations at addresses reused without a free');
      body.push(`<tr class="group-row"><td class="src" colspan="${columns}">Not among the trace's allocations: ${what.join(', and ')}</td></tr>`);
      for (const row of unlistedRows) addRow(row, true);
      body.push(`<tr class="group-row"><td class="src" colspan="${columns}">The trace's allocations</td></tr>`);
    }
    for (const row of rows) addRow(row, false);
    if (rows.length === 0) body.push(`<tr class="empty-row"><td class="src" colspan="${columns}">No allocation of the trace live ${byEvent ? 'after this event' : 'at this time'}.</td></tr>`);
    table.tBodies[0].innerHTML = body.join('');
    table.hidden = false;
  }

  // ---------------------------------------------------------------- OOM panel

  // Where `memsnap oom` took the block-level facts from (state.block_facts).
  const BLOCK_FACTS = {
    dump: 'from the dump',
    replayed: 'replayed to the OOM from the dump',
    approximate: 'approximate: replayed, but the trace does not reproduce the dump exactly',
  };

  // What `memsnap oom` says about oom entry k (0-based) of a run.
  function showOom(run, k) {
    const a = run.oomAnalyses[k];
    const o = run.oom[k];
    const panel = $('oom-panel');
    const body = $('oom-body');
    panel.hidden = false;
    const when = o && o.t_s != null ? ` at t = ${formatSeconds(Number(o.t_s))}` : '';
    $('oom-heading').textContent = `Out of memory: ${run.name}, oom entry ${k + 1} of ${run.oom.length}${when}`;
    if (!a) {
      body.innerHTML = `<p class="hint">This page holds the analysis of the first ${run.oomAnalyses.length} oom entries only; run <code>memsnap oom ${esc(run.file)} --at ${k + 1}</code>.</p>`;
      info.oomPanel = { run: run.ordinal, ordinal: k + 1, verdict: null };
      return;
    }
    const st = a.state || {};
    const row = (label, value, note = '') => `<tr><th>${esc(label)}</th><td>${value}</td><td class="note">${esc(note)}</td></tr>`;
    const bytes = (v) => (v == null ? 'unknown' : (v < 0 ? formatSignedBytes(v) : formatBytes(v)));
    const verdicts = (a.verdicts || []).map((v, i) => `<p class="verdict${i === 0 ? ' primary' : ''}" data-verdict="${esc(v.verdict)}">${i === 0 ? '' : 'Also: '}${esc(v.sentence)}</p>`).join('');
    const facts = [
      row('request', bytes(a.request), `stream ${a.stream}`),
      row('device free', bytes(a.device_free), "the driver's free memory"),
      row('source', esc(a.request_source), a.request_category),
      row('reserved', bytes(st.reserved)),
      row('live', bytes(st.live), 'baseline + delta at the OOM'),
      row('awaiting free', bytes(st.awaiting_free)),
      row('free in segments', bytes(st.free)),
      st.block_facts !== 'unknown'
        ? row('largest usable block', bytes(st.largest_usable_block), `default pool, stream ${a.stream}; ${BLOCK_FACTS[st.block_facts] || ''}`)
        : row('largest free block', 'unknown', `${formatCount(st.entries_after)} entries after the OOM changed the allocator before the dump, and ${st.block_facts_unknown}`),
    ].join('');
    const live = (a.live_by_category || []).map((r) => `<tr><td class="src">${esc(r.source)}</td><td>${formatBytes(r.bytes)}</td><td>${formatCount(r.count)}</td></tr>`).join('');
    body.innerHTML = `<div class="verdicts">${verdicts}</div>`
      + `<div class="oom-grid"><table class="facts">${facts}</table>`
      + `<table class="live"><thead><tr><th class="src">live by category</th><th>bytes</th><th>count</th></tr></thead><tbody>${live}</tbody></table></div>`
      + `<p class="hint">The same as <code>memsnap oom ${esc(run.file)}${k > 0 ? ` --at ${k + 1}` : ''}</code>, which also lists sources and what grew before.</p>`;
    info.oomPanel = { run: run.ordinal, ordinal: k + 1, verdict: a.verdict };
    document.body.dataset.oomVerdict = a.verdict;
  }

  // ---------------------------------------------------------------- ranks (served)

  // The served files as ranks (GET /api/ranks: memsnap ranks --json): peak,
  // its time, reserved, fragmentation, top source, OOMs, outliers marked; a
  // row opens that rank in every view, at its peak.
  async function showRanks() {
    if (!SERVED || RUNS.length < 2) return;
    const panel = $('ranks-panel');
    panel.hidden = false;
    try {
      const ranks = await askServer('/api/ranks', {});
      const byFile = new Map(RUNS.map((r, i) => [r.file, i]));  // shown paths, as below
      const body = $('ranks-table').querySelector('tbody');
      body.replaceChildren(...ranks.ranks.map((r) => {
        const run = byFile.get(T.printable(r.file));
        const row = element('tr');
        row.dataset.run = String(run ?? '');
        if (r.outlier) row.classList.add('outlier');
        const cells = [
          element('td', r.rank === null ? '-' : String(r.rank), 'num'),
          element('td', RUNS[run] ? RUNS[run].name : T.printable(r.file)),
          element('td', formatBytes(r.absolute_peak), 'num'),
          element('td', r.peak_time_s === null ? '-' : r.peak_time_s.toFixed(6), 'num'),
          element('td', r.reserved_peak === null ? '-' : formatBytes(r.reserved_peak), 'num'),
          element('td', r.fragmentation === null ? '-' : `${(100 * r.fragmentation).toFixed(1)}%`, 'num'),
          element('td', r.top_source ? T.printable(r.top_source) : '-'),
          element('td', r.oom_count ? String(r.oom_count) : '', 'num'),
          element('td', r.outlier ? 'outlier' : ''),
        ];
        row.append(...cells);
        if (run !== undefined) row.addEventListener('click', () => openRank(run, r.peak_time_s, row));
        return row;
      }));
      const s = ranks.spread;
      $('ranks-summary').textContent = `${formatCount(ranks.files_read)} files: peak ${formatBytes(s.min)} to ${formatBytes(s.max)}, median ${formatBytes(s.median)}; `
        + `${formatCount(ranks.outliers.length)} outlier${ranks.outliers.length === 1 ? '' : 's'} (as memsnap ranks marks them)`;
      $('ranks-table').hidden = false;
      info.ranks = { rows: ranks.ranks.length, outliers: ranks.outliers.length };
    } catch (err) {
      $('ranks-summary').textContent = String(err.message || err);
    }
  }

  // One rank in every view: its line highlighted, the stacked and allocation
  // views and the search on it, the drill-down and the allocator at its peak.
  function openRank(run, peakS, row) {
    $('ranks-table').querySelectorAll('tr.selected').forEach((x) => x.classList.remove('selected'));
    row.classList.add('selected');
    state.stackRun = run;
    if ($('stack-run')) $('stack-run').value = String(run);
    allocView.open(run);
    segmentView.open(run);
    $('search-run').value = String(run);
    render();
    highlightRun(RUNS[run].ordinal);
    if (peakS !== null && state.xMode === 'time') {
      drill({ timeS: peakS });
      showAllocator(peakS);
    }
    info.openedRank = run;
    $('chart').scrollIntoView({ block: 'center' });
  }

  // ---------------------------------------------------------------- band charts (served)

  // memory_viz's Active Memory Timeline and Active Cached Segment Timeline
  // on the server's layouts (GET /api/layout, GET /api/segment-timeline):
  // the window's largest allocations (or segments), each a band stacked in
  // the order they were made over one band of everything else, for the
  // chart's x window; a zoom asks again and draws smaller ones. Hover names
  // an item, a click pins it.
  const REST_COLOR = 'rgba(148, 163, 184, 0.45)';
  const POOL_COLORS = ['#0891b2', '#7c3aed', '#059669', '#db2777', '#ca8a04', '#2563eb', '#ea580c', '#65a30d'];
  const allocationDetails = new Map();

  // One answer per key, asked once (a failed one is asked again); at most
  // 500 kept per cache.
  function askedOnce(cache, key, ask) {
    if (!cache.has(key)) {
      if (cache.size > 500) cache.clear();
      const asked = ask();
      asked.catch(() => cache.delete(key));
      cache.set(key, asked);
    }
    return cache.get(key);
  }

  function allocationDetail(run, entry) {
    return askedOnce(allocationDetails, `${run}:${entry}`, () => askServer('/api/allocation', { file: run, entry }));
  }

  // The chart's x window in a run's own terms (seconds from its first timed
  // entry, or entry positions), clamped to the run; null when empty.
  function runWindow(runIndex) {
    const run = RUNS[runIndex];
    const axis = state.xMode === 'time' ? 'time' : 'event';
    const end = axis === 'time' ? run.durationS : Number(run.stats.event_count);
    if (!(end > 0)) return null;
    let from = 0;
    let to = end;
    if (plot && plot.scales.x.min != null && plot.scales.x.max != null) {
      from = Math.max(0, plot.scales.x.min);
      to = Math.min(end, plot.scales.x.max);
    }
    return to > from ? { axis, from, to } : null;
  }

  // One band chart: `config` names its elements (panel, run, summary, wrap,
  // canvas, tip, pinned), its route and budget, where its items and top are
  // in the answer, and how an item is coloured, described and pinned.
  function bandChart(config) {
    const chart = { config, run: 0, data: null, stacked: null, timer: 0, asked: 0, hover: -1, pinned: null, search: null };
    const items = () => chart.data[config.items];
    const top = () => Math.max(1, ...chart.data[config.top]) * 1.05;

    // Served, each window is asked of the server; offline, config.local cuts
    // the page's embedded layout (a chart without one stays hidden).
    const available = () => SERVED || (config.local && RUNS.some((r, i) => config.local(i, null)));

    chart.schedule = () => {
      if (!available() || $(config.panel).hidden) return;
      clearTimeout(chart.timer);
      chart.timer = setTimeout(chart.ask, 60);
    };

    // Asks again even for the same window (tests, a new search).
    chart.refresh = () => {
      chart.key = null;
      chart.schedule();
    };

    chart.ask = async () => {
      const win = runWindow(chart.run);
      const canvas = $(config.canvas);
      align();
      if (!win) {
        chart.data = null;
        $(config.summary).textContent = 'Nothing in this window (or no trace entries in this run).';
        draw();
        return;
      }
      const params = { file: chart.run, axis: win.axis, from: win.from, to: win.to, width: Math.max(1, Math.round(canvas.clientWidth)), budget: config.budget };
      if (chart.search && chart.search.run === chart.run) params.q = chart.search.q;
      // A redraw of the chart that keeps its window (another view, markers)
      // asks nothing again.
      const key = JSON.stringify(params);
      if (chart.data && key === chart.key) return;
      chart.key = key;
      const asked = ++chart.asked;
      const t0 = performance.now();
      try {
        const data = SERVED ? await askServer(config.route, params) : config.local(chart.run, win);
        if (asked !== chart.asked) return; // a newer window was asked for
        if (!data) throw new Error('This run embeds no allocation view (memsnap plot --max-entries 0, or no trace entries on this axis).');
        // Column c starts at colFrom + c * colStep in the axis' units: the
        // server's columns are the window's own, the page's are cut from its
        // embedded ones.
        if (data.colFrom === undefined) {
          data.colFrom = win.from;
          data.colStep = (win.to - win.from) / data.band.length;
        }
        data.window = win;
        chart.data = data;
        chart.stacked = T.stackAllocations({ band: data.band, allocations: data[config.items] });
        chart.hover = -1;
        $(config.summary).textContent = config.summary_text(data);
        info[config.name] = { run: chart.run, axis: win.axis, from: win.from, to: win.to, width: data.band.length,
          drawn: data[config.items].length, complete: data.complete, matched: data.matched, query: data.query, ms: performance.now() - t0 };
        draw();
        document.body.dataset[config.name] = String(asked);
      } catch (err) {
        if (asked !== chart.asked) return;
        chart.data = null;
        chart.key = null;
        $(config.summary).textContent = String(err.message || err);
        draw();
      }
    };

    // The canvas spans the chart's plotting area, so the two share an x axis.
    function align() {
      const canvas = $(config.canvas);
      if (!plot) return;
      const over = plot.over.getBoundingClientRect();
      const wrap = $(config.wrap).getBoundingClientRect();
      canvas.style.marginLeft = `${Math.max(0, over.left - wrap.left)}px`;
      canvas.style.width = `${Math.max(100, over.width)}px`;
    }

    function draw() {
      const canvas = $(config.canvas);
      const width = canvas.clientWidth;
      const height = canvas.clientHeight;
      const ratio = window.devicePixelRatio || 1;
      canvas.width = Math.round(width * ratio);
      canvas.height = Math.round(height * ratio);
      const g = canvas.getContext('2d');
      g.setTransform(ratio, 0, 0, ratio, 0, 0);
      g.clearRect(0, 0, width, height);
      const d = chart.data;
      if (!d || !d.band.length) return;
      const columns = d.band.length;
      const span = d.window.to - d.window.from;
      const xOf = (c) => ((d.colFrom + c * d.colStep - d.window.from) / span) * width;
      const cw = (d.colStep / span) * width;
      const highest = top();
      const y = (bytes) => height - (Math.max(0, bytes) / highest) * height;
      g.fillStyle = REST_COLOR; // the band of everything not drawn, lowest
      g.beginPath();
      g.moveTo(0, height);
      g.moveTo(xOf(0), height);
      for (let c = 0; c < columns; c++) {
        g.lineTo(xOf(c), y(d.band[c]));
        g.lineTo(xOf(c + 1), y(d.band[c]));
      }
      g.lineTo(xOf(columns), height);
      g.fill();
      const searching = !!d.query;
      chart.stacked.bands.forEach((b, k) => {
        const item = items()[k];
        if (b.last < b.first) return;
        const size = Number(item.size);
        g.beginPath();
        // A step outline: a point only where the bottom changes (long-lived
        // allocations span thousands of columns with few changes).
        const bottom = (c) => b.bottoms[c - b.first];
        g.moveTo(xOf(b.first), y(bottom(b.first) + size));
        for (let c = b.first + 1; c <= b.last; c++) {
          if (bottom(c) === bottom(c - 1)) continue;
          g.lineTo(xOf(c), y(bottom(c - 1) + size));
          g.lineTo(xOf(c), y(bottom(c) + size));
        }
        g.lineTo(xOf(b.last + 1), y(bottom(b.last) + size));
        g.lineTo(xOf(b.last + 1), y(bottom(b.last)));
        for (let c = b.last; c > b.first; c--) {
          if (bottom(c) === bottom(c - 1)) continue;
          g.lineTo(xOf(c), y(bottom(c)));
          g.lineTo(xOf(c), y(bottom(c - 1)));
        }
        g.lineTo(xOf(b.first), y(bottom(b.first)));
        g.closePath();
        g.globalAlpha = searching && !item.matches ? 0.2 : 1;
        g.fillStyle = config.colour(item);
        g.fill();
        g.globalAlpha = 1;
        const pinned = chart.pinned === item;
        if (pinned || k === chart.hover || (searching && item.matches)) {
          g.strokeStyle = CLICK_COLOR;
          g.lineWidth = pinned ? 2 : 1;
          g.stroke();
        } else if (cw * (b.last - b.first + 1) > 3) {
          g.strokeStyle = 'rgba(255, 255, 255, 0.7)';
          g.lineWidth = 0.5;
          g.stroke();
        }
        if (pinned) {
          // Where it began and ended, on the axis.
          g.setLineDash([4, 3]);
          g.strokeStyle = CLICK_COLOR;
          g.beginPath();
          g.moveTo(xOf(b.first), 0);
          g.lineTo(xOf(b.first), height);
          if (config.ended(item)) {
            g.moveTo(xOf(b.last + 1), 0);
            g.lineTo(xOf(b.last + 1), height);
          }
          g.stroke();
          g.setLineDash([]);
        }
      });
      g.fillStyle = '#475569';
      g.font = '11px system-ui, sans-serif';
      for (let i = 1; i <= 4; i++) g.fillText(formatBytes((highest * i) / 4.2), 4, y((highest * i) / 4.2) + 12);
    }
    chart.draw = draw;

    // The item under the pointer, as an index into the answer's items, or -1.
    function under(e) {
      const d = chart.data;
      if (!d) return -1;
      const rect = $(config.canvas).getBoundingClientRect();
      // The column under the pointer, then the others under its pixel (the
      // page's columns may be narrower than a pixel).
      const valueAt = (px) => d.window.from + ((px - rect.left) / rect.width) * (d.window.to - d.window.from);
      const columnAt = (px) => Math.floor((valueAt(px) - d.colFrom) / d.colStep);
      const bytes = ((rect.bottom - e.clientY) / rect.height) * top();
      const exact = columnAt(e.clientX);
      const from = Math.max(0, columnAt(e.clientX - 0.5));
      const to = Math.min(d.band.length - 1, columnAt(e.clientX + 0.5));
      for (const column of [exact, ...Array.from({ length: Math.max(0, to - from + 1) }, (_, i) => from + i)]) {
        if (column < 0 || column >= d.band.length) continue;
        const k = T.allocationAtPoint({ allocations: items() }, chart.stacked, column, bytes);
        if (k >= 0) return k;
      }
      return -1;
    }

    async function hover(e) {
      const t0 = performance.now();
      const k = under(e);
      const tip = $(config.tip);
      if (k !== chart.hover) {
        chart.hover = k;
        draw();
      }
      if (k < 0) {
        tip.hidden = true;
        return;
      }
      const d = chart.data;
      const item = items()[k];
      const wrap = $(config.wrap).getBoundingClientRect();
      tip.hidden = false;
      tip.style.left = `${Math.min(e.clientX - wrap.left + 12, wrap.width - 360)}px`;
      tip.style.top = `${e.clientY - wrap.top + 12}px`;
      tip.replaceChildren(element('div', config.facts(item, d), 'facts'));
      tip.dataset.entry = String(config.id(item));
      if (config.more) {
        const extra = await config.more(chart.run, item).catch(() => null);
        if (extra && chart.hover === k && chart.data === d) {
          tip.replaceChildren(element('div', config.facts(item, d), 'facts'), ...extra.nodes);
          tip.dataset.frames = String(extra.frames);
          info[`${config.name}Hover`] = { entry: config.id(item), ms: performance.now() - t0 };
        }
      }
    }

    function pin(e) {
      const k = under(e);
      chart.pinned = k < 0 ? null : items()[k];
      draw();
      const box = $(config.pinned);
      if (k < 0) {
        box.hidden = true;
        return;
      }
      config.pin(chart.run, chart.pinned, box);
    }

    chart.wire = () => {
      if (!available()) return;
      $(config.panel).hidden = false;
      const select = $(config.runSelect);
      select.replaceChildren(...RUNS.map((r, i) => {
        const option = element('option', r.name || r.label);
        option.value = String(i);
        return option;
      }));
      select.hidden = RUNS.length < 2;
      select.addEventListener('change', () => chart.open(Number(select.value)));
      const canvas = $(config.canvas);
      canvas.addEventListener('mousemove', hover);
      canvas.addEventListener('mouseleave', () => {
        chart.hover = -1;
        $(config.tip).hidden = true;
        draw();
      });
      canvas.addEventListener('click', pin);
      new ResizeObserver(() => chart.schedule()).observe($(config.wrap));
    };

    // Shows run `i`.
    chart.open = (i) => {
      chart.run = i;
      $(config.runSelect).value = String(i);
      chart.pinned = null;
      $(config.pinned).hidden = true;
      chart.schedule();
    };
    return chart;
  }

  function userFramesList(frames) {
    const users = frames.filter((f) => f.users).slice(0, 6);
    const list = element('ol');
    (users.length ? users : frames.slice(0, 6)).forEach((f) => list.append(element('li', `${f.name} ${f.filename}:${f.line}`, f.users ? 'users' : '')));
    return list;
  }

  function secondsOrEntry(seconds, entry) {
    return seconds === null ? `entry ${entry}` : `${seconds.toFixed(6)} s (entry ${entry})`;
  }

  // Offline: an allocation's frames from the page's tables (memsnap plot
  // embeds them for the allocations it draws).
  function embeddedFrames(run, a) {
    const embedded = DATA.runs[run].allocations;
    if (!embedded || a.stack == null || a.stack < 0) return [];
    return embedded.stacks[a.stack].map((f) => {
      const [name, filename, line, users] = embedded.frames[f];
      return { name, filename, line, users: users === 1 };
    });
  }

  const allocView = bandChart({
    name: 'allocations', panel: 'allocations-panel', runSelect: 'allocations-run', summary: 'allocations-summary',
    wrap: 'allocations-wrap', canvas: 'allocations-canvas', tip: 'allocations-tip', pinned: 'allocations-pinned',
    route: '/api/layout', budget: 2000, items: 'allocations', top: 'high',
    // The page's own layout (memsnap plot); `win` null asks whether the run has one.
    local: (run, win) => {
      const embedded = DATA.runs[run] && DATA.runs[run].allocations;
      if (!win) return !!embedded;
      return T.sliceAllocations(embedded, win.axis === 'time' ? 'time' : 'event', win.from, win.to,
        Math.max(1, Math.round($('allocations-canvas').clientWidth)));
    },
    summary_text: (d) => `${formatCount(d.allocations.length)} allocation${d.allocations.length === 1 ? '' : 's'} drawn`
      + (SERVED
        ? (d.complete ? ' (every one live in this window)' : ' (the largest; zoom in for smaller ones)')
        : ' (of the largest this page embeds over the whole trace: memsnap serve draws smaller ones as you zoom)')
      + (d.query ? ` · ${formatCount(d.matched)} match “${d.query}”` : ''),
    colour: (a) => CATEGORY_COLORS[a.category] || '#64748b',
    id: (a) => a.entry,
    ended: (a) => a.end_entry !== null,
    facts: (a, d) => `${formatBytes(Number(a.size))} · ${a.category} · ${d.sources[a.source]} · made at ${secondsOrEntry(a.time_s, a.entry)}, `
      + (a.end_entry === null ? 'live at the end of the trace' : `ended at ${secondsOrEntry(a.end_time_s, a.end_entry)}`),
    more: async (run, a) => {
      const frames = SERVED ? (await allocationDetail(run, a.entry)).frames : embeddedFrames(run, a);
      const more = frames.length - Math.min(6, frames.filter((f) => f.users).length || frames.length);
      return { frames: frames.length, nodes: [userFramesList(frames),
        element('div', frames.length ? `${more > 0 ? `${more} more frames; ` : ''}click for the whole stack` : 'no stack recorded', 'hint')] };
    },
    pin: (run, a, box) => {
      if (SERVED) {
        showAllocation(run, a.entry, box);
        return;
      }
      const d = allocView.data;
      box.hidden = false;
      box.replaceChildren(element('h3', d.sources[a.source]), element('p', allocView.config.facts(a, d), 'facts'),
        element('h4', 'Allocated at'), framesList(embeddedFrames(run, a)),
        element('p', 'Its address and the stack of its free: memsnap serve.', 'hint'));
      box.dataset.entry = String(a.entry);
    },
  });
  window.memsnapAllocations = allocView; // for the browser tests

  const segmentView = bandChart({
    name: 'segments', panel: 'segments-panel', runSelect: 'segments-run', summary: 'segments-summary',
    wrap: 'segments-wrap', canvas: 'segments-canvas', tip: 'segments-tip', pinned: 'segments-pinned',
    route: '/api/segment-timeline', budget: 500, items: 'segments', top: 'reserved',
    summary_text: (d) => `${formatCount(d.segments.length)} segment${d.segments.length === 1 ? '' : 's'} drawn`
      + (d.complete ? ' (every one reserved in this window)' : ' (the largest; zoom in for smaller ones)')
      + ` · ${formatCount(d.segment_events)} segment entries in the trace`,
    colour: (g) => (g.expandable ? '#0d9488' : POOL_COLORS[(g.pool ? Math.abs(g.pool[0] * 31 + g.pool[1]) : 0) % POOL_COLORS.length]),
    id: (g) => g.address,
    ended: (g) => g.end_entry !== null,
    facts: (g) => `${g.expandable ? 'expandable mapping' : 'segment'} 0x${g.address.toString(16)} · ${formatBytes(Number(g.size))} · `
      + `${g.pool_label || 'pool not in the dump'} · stream ${g.stream} · `
      + `${g.begin_entry === null ? 'reserved before the trace' : `reserved at entry ${g.begin_entry}`}, `
      + `${g.end_entry === null ? 'held at the dump' : `released at entry ${g.end_entry}`}`,
    pin: (run, g, box) => {
      box.hidden = false;
      box.replaceChildren(element('p', segmentView.config.facts(g), 'facts'),
        element('p', `memsnap segments ${RUNS[run].file} --time T shows its blocks at any moment; so does the allocator panel below.`, 'hint'));
      box.dataset.address = String(g.address);
    },
  });
  window.memsnapSegments = segmentView;

  function scheduleBandCharts() {
    allocView.schedule();
    segmentView.schedule();
  }

  // ---------------------------------------------------------------- a drill-down row opened

  // The allocations of a row's source live at the clicked moment, largest
  // first, per run; a click on one shows its stack. Served, the server lists
  // them (GET /api/live, as replay-to-time counts them); offline, the largest
  // of those the page embeds for its allocation view.
  async function openDrillRow(tr) {
    const source = tr.dataset.source;
    if (source == null || tr.dataset.unlisted) return;
    $('drilldown').querySelectorAll('tr.selected').forEach((x) => x.classList.remove('selected'));
    tr.classList.add('selected');
    const box = $('drill-allocations');
    const detail = $('drill-allocation-detail');
    box.hidden = false;
    detail.hidden = true;
    const byEvent = state.clickedEvent != null;
    const parts = [];
    for (let r = 0; r < RUNS.length && parts.length < 8; r++) {
      if (!(Number(tr.getAttribute(`data-bytes-${r}`)) > 0)) continue;
      const run = RUNS[r];
      let listed;
      try {
        listed = SERVED
          ? await askServer('/api/live', { file: r, source, ...(byEvent ? { position: state.clickedEvent + 1 } : { time: state.clickedTime }) })
          : embeddedLive(r, source, byEvent ? { position: state.clickedEvent + 1 } : { timeS: state.clickedTime });
      } catch (err) {
        parts.push(element('p', `${run.name}: ${err.message || err}`, 'error'));
        continue;
      }
      if (!listed) {
        parts.push(element('p', `${run.name}: this page embeds no allocations to list (memsnap serve lists them all).`, 'hint'));
        continue;
      }
      const what = SERVED
        ? `${run.name}: ${formatCount(listed.count)} allocation${listed.count === 1 ? '' : 's'} of ${source} live then, ${formatBytes(listed.bytes)}${listed.count > listed.rows.length ? ` (the largest ${listed.rows.length})` : ''}; click one for its stack`
        : `${run.name}: the ${formatCount(listed.rows.length)} largest of ${source} live then among the allocations this page embeds (memsnap serve lists every one); click one for its stack`;
      const table = element('table');
      table.innerHTML = '<thead><tr><th class="num">entry</th><th class="num">size</th><th class="num">made at (s)</th></tr></thead>';
      const body = element('tbody');
      listed.rows.forEach((row) => {
        const line = element('tr');
        line.dataset.entry = String(row.entry);
        line.append(element('td', String(row.entry), 'num'), element('td', formatBytes(Number(row.size)), 'num'),
          element('td', row.time_s == null ? '-' : row.time_s.toFixed(6), 'num'));
        line.addEventListener('click', () => {
          body.querySelectorAll('tr.selected').forEach((x) => x.classList.remove('selected'));
          line.classList.add('selected');
          if (SERVED) showAllocation(r, row.entry, detail);
          else showEmbeddedAllocation(r, row.item, detail);
        });
        body.append(line);
      });
      table.append(body);
      const listing = element('div', undefined, 'drill-run-allocations');
      listing.dataset.run = String(r);
      listing.dataset.count = String(SERVED ? listed.count : listed.rows.length);
      listing.append(element('p', what, 'facts'), table);
      parts.push(listing);
    }
    box.replaceChildren(element('h3', `Allocations of ${source}`), ...parts);
    info.drillRow = { source, runs: parts.length };
  }

  // Offline: the embedded allocations of `source` live at a moment, largest first.
  function embeddedLive(r, source, at) {
    const embedded = DATA.runs[r].allocations;
    if (!embedded) return null;
    const it = embedded.items;
    const sourceIndex = embedded.sources.indexOf(source);
    const rows = [];
    for (let k = 0; k < it.entry.length; k++) {
      if (it.source[k] !== sourceIndex) continue;
      const live = at.position != null
        ? it.entry[k] < at.position && (it.end_entry[k] < 0 || it.end_entry[k] >= at.position)
        : it.time_s[k] != null && it.time_s[k] <= at.timeS && (it.end_entry[k] < 0 || it.end_time_s[k] == null || it.end_time_s[k] > at.timeS);
      if (live) rows.push({ entry: it.entry[k], size: it.size[k], time_s: it.time_s[k], item: k });
    }
    rows.sort((a, b) => b.size - a.size || a.entry - b.entry);
    return { rows: rows.slice(0, 500) };
  }

  function showEmbeddedAllocation(r, k, box) {
    const embedded = DATA.runs[r].allocations;
    const it = embedded.items;
    const a = { entry: it.entry[k], size: it.size[k], time_s: it.time_s[k], end_entry: it.end_entry[k] < 0 ? null : it.end_entry[k],
      end_time_s: it.end_time_s[k], category: it.category[k], source: it.source[k], stack: it.stack[k] };
    box.hidden = false;
    box.replaceChildren(element('h3', embedded.sources[a.source]),
      element('p', allocView.config.facts(a, { sources: embedded.sources }), 'facts'),
      element('h4', 'Allocated at'), framesList(embeddedFrames(r, a)),
      element('p', 'Its address and the stack of its free: memsnap serve.', 'hint'));
    box.dataset.entry = String(a.entry);
  }

  // ---------------------------------------------------------------- allocator panel

  const MAX_ALLOC_RUNS = 4; // runs shown side by side in the allocator panel (kAllocatorPanelRuns in timeline.h)

  // Segments as bars to scale (the widest full width), each block a span
  // coloured by state; the first free block of the largest free size is
  // outlined. `drawn`: [{ address (hex text), size, pool (label), stream,
  // expandable, blocks (flat offset, size, state triples) }].
  function segmentRowsHtml(drawn, largestFree) {
    const widest = Math.max(1, ...drawn.map((g) => Number(g.size)));
    let outlined = false; // one largest free block per moment, the first in bar order
    return drawn.map((g) => {
      const size = Number(g.size);
      const decoded = T.segmentBlocks(g.blocks, outlined ? 0 : largestFree);
      if (decoded.some((b) => b.largest)) outlined = true;
      const blocks = decoded.map((b) => {
        const left = (100 * b.offset) / size;
        const width = Math.max((100 * b.size) / size, 0.15);
        const what = ['allocated', 'awaiting free', 'free'][b.state] || 'block';
        return `<span class="blk s${b.state}${b.largest ? ' largest' : ''}" data-offset="${b.offset}" data-state="${b.state}" style="left:${left.toFixed(3)}%;width:${width.toFixed(3)}%" title="${what} ${formatBytes(b.size)} at +${formatBytes(b.offset)}"></span>`;
      }).join('');
      const label = `${esc(g.address)} ${formatBytes(size)} · ${esc(g.pool)} · stream ${esc(String(g.stream))}${g.expandable ? ' · expandable' : ''}`;
      const barWidth = Math.max((100 * size) / widest, 2).toFixed(2);
      return `<div class="alloc-row" data-address="${esc(g.address)}"><span class="seg-label" title="${label}">${label}</span>`
        + `<span class="seg-bar-wrap"><span class="seg-bar" style="display:block;width:${barWidth}%">${blocks}</span></span></div>`;
    }).join('');
  }

  // The allocator's segments and blocks at the page's moment nearest to tS,
  // for each run (the C++ side replayed them from the dump: memsnap segments
  // --time gives the same for the time stated).
  function showAllocator(tS) {
    if (SERVED) {
      showServedAllocator({ time: tS });
      return;
    }
    const runs = RUNS.slice(0, MAX_ALLOC_RUNS);
    if (!runs.some((r) => r.allocator || r.allocatorReason)) return;
    const panel = $('alloc-panel');
    panel.hidden = false;
    const shown = [];
    const html = runs.map((run) => {
      const title = `<div class="alloc-title" title="${esc(fullName(run))}">${esc(run.name)}</div>`;
      if (!run.allocator) {
        return `<div class="alloc-run" data-run="${run.ordinal}">${title}<p class="hint">Not available: ${esc(run.allocatorReason || 'no allocator state in this run')}.</p></div>`;
      }
      const moments = run.allocator.moments;
      const at = T.allocatorMomentAt(run.allocator, tS);
      const m = at.moment;
      const drawn = at.segments;
      const t = Number(m.t_s);
      shown.push({ run: run.ordinal, t_s: t, position: m.position, reserved: m.reserved, allocated: m.allocated,
        awaiting_free: m.awaiting_free, free: m.free, largest_free_block: m.largest_free_block,
        segment_count: m.segment_count, bars: drawn.length, exact: at.exact });
      const exact = run.allocator.exact ? '' : ' The replay of this run does not reproduce its dump exactly, so this state is approximate (see memsnap segments).';
      const totals = `reserved ${formatBytes(m.reserved)} · allocated ${formatBytes(m.allocated)} · awaiting free ${formatBytes(m.awaiting_free)} · free ${formatBytes(m.free)} · largest free block ${formatBytes(m.largest_free_block)} · ${formatCount(m.segment_count)} segments`;
      const rows = segmentRowsHtml(drawn, Number(m.largest_free_block));
      const more = m.segment_count > drawn.length
        ? `<p class="hint">… ${formatCount(m.segment_count - drawn.length)} smaller segments not drawn.</p>` : '';
      // Holding every change, the state at the click is exact: name the click's time.
      const shownS = at.exact ? tS : t;
      const cmd = `memsnap segments ${run.file}${run.device != null ? ` --device ${run.device}` : ''} --time ${shownS}`;
      const which = at.exact
        ? `At t = ${formatSeconds(tS)}: the allocator as it was then (this page holds ${formatCount(moments.length)} moments, one after each change; the last before the click came at t = ${formatSeconds(t)}, after ${formatCount(Number(m.position))} trace entries; <code>${esc(cmd)}</code> shows the same).`
        : `At t = ${formatSeconds(t)}: the nearest of the ${formatCount(moments.length)} moments this page holds for this run (after ${formatCount(Number(m.position))} trace entries; <code>${esc(cmd)}</code> shows the same).`;
      return `<div class="alloc-run" data-run="${run.ordinal}" data-time="${t}" style="--run-color:${run.color}">${title}`
        + `<p class="hint">${which}${exact}</p>`
        + `<div class="alloc-totals">${totals}</div>${rows}${more}</div>`;
    }).join('');
    const extra = RUNS.length > runs.length ? `<p class="hint">The first ${runs.length} runs are shown.</p>` : '';
    $('alloc-body').innerHTML = html + extra;
    $('alloc-heading').textContent = `Allocator state near t = ${formatSeconds(tS)}`;
    info.allocPanel = { clickedS: tS, runs: shown };
    document.body.dataset.allocTime = String(tS);
  }

  // Served, the allocator at any moment comes from the server (GET
  // /api/segments: what `memsnap segments --time T --json` says, with the
  // blocks of the largest segments), moved by a click on the chart or the
  // slider; a block names the allocation that holds it (GET /api/block).
  const MAP_SEGMENTS = 48;
  const allocatorView = { asked: 0, timer: 0, positions: [], blocks: new Map(), hover: null };

  async function showServedAllocator(at) {
    const asked = ++allocatorView.asked;
    const runs = RUNS.slice(0, MAX_ALLOC_RUNS);
    $('alloc-panel').hidden = false;
    const answers = await Promise.all(runs.map((run, i) => {
      const params = { file: i, limit: MAP_SEGMENTS };
      if (at.time != null) params.time = at.time;
      else params.position = Math.min(at.position, Number(run.stats.event_count) || 0);
      return askServer('/api/segments', params).then((answer) => ({ answer }), (err) => ({ err }));
    }));
    if (asked !== allocatorView.asked) return; // a newer moment was asked for
    const shown = [];
    const html = runs.map((run, i) => {
      const title = `<div class="alloc-title" title="${esc(fullName(run))}">${esc(run.name)}</div>`;
      const { answer, err } = answers[i];
      if (err) {
        return `<div class="alloc-run" data-run="${i}">${title}<p class="hint">Not available: ${esc(err.message || String(err))}</p></div>`;
      }
      const r = answer.report;
      const m = r.totals;
      allocatorView.positions[i] = r.position;
      const drawn = r.segments.map((g, k) => ({ address: `0x${g.address.toString(16)}`, size: g.reserved, pool: g.pool_label,
        stream: g.stream, expandable: g.expandable, blocks: answer.map[k].blocks.flatMap((b) => [b[0], b[1], b[2]]) }));
      shown.push({ run: i, t_s: r.time_s, position: r.position, reserved: m.reserved, allocated: m.allocated,
        awaiting_free: m.awaiting_free, free: m.free, largest_free_block: m.largest_free_block,
        segment_count: r.segment_count, bars: drawn.length, exact: true });
      const approximate = r.history && r.history.exact === false
        ? ' The replay of this run does not reproduce its dump exactly, so this state is approximate (see memsnap segments).' : '';
      const cmd = `memsnap segments ${run.file}${run.device != null ? ` --device ${run.device}` : ''} --time ${r.time_s}`;
      const totals = `reserved ${formatBytes(m.reserved)} · allocated ${formatBytes(m.allocated)} · awaiting free ${formatBytes(m.awaiting_free)} · free ${formatBytes(m.free)} · largest free block ${formatBytes(m.largest_free_block)} · ${formatCount(r.segment_count)} segments`;
      const more = r.segment_count > drawn.length
        ? `<p class="hint">… ${formatCount(r.segment_count - drawn.length)} smaller segments not drawn.</p>` : '';
      return `<div class="alloc-run" data-run="${i}" data-time="${r.time_s}" data-position="${r.position}" style="--run-color:${run.color}">${title}`
        + `<p class="hint">At t = ${formatSeconds(r.time_s)}, after ${formatCount(r.position)} trace entries, as <code>${esc(cmd)}</code> says. Hover an allocated block for its allocation, click it for the stack.${approximate}</p>`
        + `<div class="alloc-totals">${totals}</div>${segmentRowsHtml(drawn, Number(m.largest_free_block))}${more}</div>`;
    }).join('');
    const extra = RUNS.length > runs.length ? `<p class="hint">The first ${runs.length} runs are shown.</p>` : '';
    $('alloc-body').innerHTML = html + extra;
    const first = shown[0];
    $('alloc-heading').textContent = first ? `Allocator state at t = ${formatSeconds(first.t_s)}` : 'Allocator state';
    info.allocPanel = { served: true, asked: at, runs: shown };
    document.body.dataset.allocTime = String(at.time ?? '');
    document.body.dataset.allocAsked = String(asked);
  }

  // The trace's allocation holding a block (null: from before the trace).
  function blockAllocation(run, address, position) {
    return askedOnce(allocatorView.blocks, `${run}:${address}:${position}`,
      () => askServer('/api/block', { file: run, address, position }).then((b) => b.allocation));
  }

  function blockUnder(target) {
    const span = target.closest && target.closest('.blk');
    if (!span || span.dataset.state !== '0') return null;
    const runEl = span.closest('.alloc-run');
    const row = span.closest('.alloc-row');
    const run = Number(runEl.dataset.run);
    return { span, run, address: parseInt(row.dataset.address, 16) + Number(span.dataset.offset), position: Number(runEl.dataset.position) };
  }

  async function hoverBlock(e) {
    const tip = $('alloc-tip');
    const block = blockUnder(e.target);
    if (!block) {
      tip.hidden = true;
      allocatorView.hover = null;
      return;
    }
    const key = `${block.run}:${block.address}`;
    allocatorView.hover = key;
    const panel = $('alloc-panel').getBoundingClientRect();
    tip.style.left = `${Math.min(e.clientX - panel.left + 12, panel.width - 360)}px`;
    tip.style.top = `${e.clientY - panel.top + 12}px`;
    tip.hidden = false;
    tip.replaceChildren(element('div', `allocated block at 0x${block.address.toString(16)}: asking...`, 'facts'));
    try {
      const a = await blockAllocation(block.run, block.address, block.position);
      if (allocatorView.hover !== key) return;
      if (!a) {
        tip.replaceChildren(element('div', 'allocated before the trace: no trace entry names it', 'facts'));
        tip.dataset.entry = '';
        return;
      }
      const users = a.frames.filter((f) => f.users).slice(0, 6);
      const list = element('ol');
      (users.length ? users : a.frames.slice(0, 6)).forEach((f) => list.append(element('li', `${f.name} ${f.filename}:${f.line}`, f.users ? 'users' : '')));
      tip.replaceChildren(element('div', `${formatBytes(a.size)} · ${a.category} · ${a.source} · entry ${a.entry}`, 'facts'), list,
        element('div', 'click for the whole stack', 'hint'));
      tip.dataset.entry = String(a.entry);
    } catch (err) {
      tip.replaceChildren(element('div', String(err.message || err), 'facts'));
    }
  }

  async function pinBlock(e) {
    const block = blockUnder(e.target);
    if (!block) return;
    const box = $('alloc-detail');
    const a = await blockAllocation(block.run, block.address, block.position);
    if (!a) {
      box.hidden = false;
      box.replaceChildren(element('p', 'This block was allocated before the trace: no trace entry names it (memsnap segments shows its stack at the dump, where the file has one).', 'hint'));
      box.dataset.entry = '';
      return;
    }
    renderAllocationDetail(box, a);
  }

  function wireServedAllocator() {
    if (!SERVED) return;
    const slider = $('alloc-slider');
    $('alloc-slider-label').hidden = false;
    $('alloc-panel').hidden = false;
    $('alloc-body').replaceChildren(element('p', 'Click the chart or move the slider: the allocator\'s segments and blocks at that moment.', 'hint'));
    slider.addEventListener('input', () => {
      clearTimeout(allocatorView.timer);
      allocatorView.timer = setTimeout(() => {
        const share = Number(slider.value) / Number(slider.max);
        if (state.xMode === 'time') {
          const t = Math.max(...RUNS.map((r) => r.durationS || 0)) * share;
          showServedAllocator({ time: Math.round(t * 1e6) / 1e6 });
        } else {
          const n = Math.max(...RUNS.map((r) => Number(r.stats.event_count) || 0));
          showServedAllocator({ position: Math.round(n * share) });
        }
      }, 80);
    });
    $('alloc-body').addEventListener('mouseover', hoverBlock);
    $('alloc-body').addEventListener('mouseleave', () => { $('alloc-tip').hidden = true; allocatorView.hover = null; });
    $('alloc-body').addEventListener('click', pinBlock);
  }

  // The oom marker within a few pixels of a click (wall-clock view), or null.
  function oomNear(leftPx) {
    if (state.xMode !== 'time' || !plot || !view) return null;
    let best = null;
    for (const run of view.runs) {
      run.oom.forEach((o, k) => {
        const t = o.t_s == null ? NaN : Number(o.t_s);
        if (!Number.isFinite(t)) return;
        const d = Math.abs(plot.valToPos(t, 'x') - leftPx);
        if (d <= 6 && (!best || d < best.d)) best = { run, k, d };
      });
    }
    return best;
  }

  // ---------------------------------------------------------------- events

  function onChartClick(e) {
    if (!plot || !view) return;
    if (Math.hypot(e.clientX - pointerDown.x, e.clientY - pointerDown.y) > 4) return; // a drag (zoom), not a click
    const rect = plot.over.getBoundingClientRect();
    const left = e.clientX - rect.left;
    const topPx = e.clientY - rect.top;
    if (left < 0 || left > rect.width || topPx < 0 || topPx > rect.height) return;
    if (state.xMode !== 'time') {
      if (!hasEventIndex()) {
        $('drill-hint').textContent = noEventDrillText();
        return;
      }
      const maxEvents = Math.max(...RUNS.map((r) => Number(r.stats.event_count) || 0));
      if (!(maxEvents > 0)) return;
      const x = plot.posToVal(left, 'x');
      const event = Math.min(Math.max(Math.floor(x), 0), maxEvents - 1);
      drill({ event });
      if (SERVED) showServedAllocator({ position: event + 1 });
      return;
    }
    const near = oomNear(left);
    if (near) showOom(near.run, near.k);
    const maxS = Math.max(...RUNS.map((r) => r.durationS));
    let t = plot.posToVal(left, 'x');
    t = Math.min(Math.max(t, 0), maxS);
    drill({ timeS: Math.round(t * 1e6) / 1e6 });
    showAllocator(Math.round(t * 1e6) / 1e6);
  }

  // Why a click in the event-index view lists nothing: the data lacks the
  // per-allocation event indices (memsnap 0.1.0 records lifetimes in µs only,
  // and event indices cannot be recovered from times).
  function noEventDrillText() {
    const need = 'The drill-down by event index needs the event index of every allocation and free, which this page\'s data does not carry';
    return hasTime()
      ? `${need} (it has their times only); switch the X axis to Wall clock to list what was live at a time.`
      : `${need}, and without timestamps (time_us) there is no wall-clock drill-down either.`;
  }

  const pointerDown = { x: 0, y: 0 };

  function wireControls() {
    const viewSel = $('view-mode');
    const runSel = $('stack-run');
    viewSel.value = state.stack;
    if (!hasStacks()) {
      for (const mode of ['category', 'source']) viewSel.querySelector(`option[value="${mode}"]`).disabled = true;
      viewSel.title = 'The stacked views need a page written by a newer memsnap';
    }
    runSel.innerHTML = RUNS.map((r) => `<option value="${r.ordinal}" title="${esc(fullName(r))}">${esc(r.name)}</option>`).join('');
    runSel.value = String(state.stackRun);
    viewSel.addEventListener('change', () => {
      state.stack = viewSel.value;
      render();
    });
    runSel.addEventListener('change', () => {
      state.stackRun = Number(runSel.value);
      render();
    });
    const sourcesInput = $('stack-sources');
    sourcesInput.value = String(state.stackSources);
    sourcesInput.addEventListener('change', () => {
      const n = Math.floor(Number(sourcesInput.value));
      if (!(n >= 0) || n === state.stackSources) return;
      state.stackSources = n;
      render();
    });
    const xSel = $('x-mode');
    const ySel = $('y-mode');
    const prec = $('precision');
    const ann = $('show-annotations');
    const steps = $('show-steps');
    xSel.value = state.xMode;
    ySel.value = state.yMode;
    prec.value = String(state.precisionRequestedMs);
    ann.checked = state.showAnnotations;
    steps.checked = state.showSteps && RUNS.some((r) => r.steps.length > 0);
    if (!hasTime()) {
      xSel.querySelector('option[value="time"]').disabled = true;
      xSel.title = 'Wall clock needs timestamps (time_us) in every file';
    }
    xSel.addEventListener('change', () => {
      if (xSel.value === 'time' && !hasTime()) {
        xSel.value = 'index';
        return;
      }
      state.xMode = xSel.value;
      render();
    });
    ySel.addEventListener('change', () => {
      state.yMode = ySel.value;
      render();
    });
    let timer = 0;
    const applyPrecision = () => {
      clearTimeout(timer);
      const v = Number(prec.value);
      if (!(v > 0) || !Number.isFinite(v)) {
        $('precision-note').textContent = 'Precision must be a positive number of milliseconds.';
        return;
      }
      if (v === state.precisionRequestedMs) return;
      state.precisionRequestedMs = v;
      render();
    };
    prec.addEventListener('change', applyPrecision);
    prec.addEventListener('input', () => {
      clearTimeout(timer);
      timer = setTimeout(applyPrecision, 250);
    });
    prec.addEventListener('keydown', (e) => {
      if (e.key === 'Enter') applyPrecision();
    });
    ann.addEventListener('change', () => {
      state.showAnnotations = ann.checked;
      writeViewToAddress();
      if (plot) plot.redraw(false, false);
      if (plot) updateReadout(plot);
    });
    steps.addEventListener('change', () => {
      state.showSteps = steps.checked;
      writeViewToAddress();
      if (plot) plot.redraw(false, false);
    });
    $('legend').addEventListener('click', (e) => {
      const chip = e.target.closest('.legend-group');
      if (chip) {
        if (chip.dataset.group === 'all') {
          for (const r of RUNS) r.visible = true;
          render();
          return;
        }
        const members = info.groups[Number(chip.dataset.group)].members;
        const anyShown = members.some((o) => RUNS[o].visible);
        const others = RUNS.filter((r) => r.visible && !members.includes(r.ordinal)).length;
        if (anyShown && others === 0) return; // keep one run on the chart
        for (const o of members) RUNS[o].visible = !anyShown;
        render();
        return;
      }
      const item = e.target.closest('.legend-item');
      if (!item) return;
      const run = RUNS[Number(item.dataset.run)];
      if (!run) return;
      if (run.visible && RUNS.filter((r) => r.visible).length === 1) return; // keep one
      run.visible = !run.visible;
      render();
    });
    $('legend').addEventListener('mouseover', (e) => {
      const item = e.target.closest('.legend-item[data-run]');
      highlightRun(item ? Number(item.dataset.run) : null);
    });
    $('legend').addEventListener('mouseleave', () => highlightRun(null));
    const chartEl = $('chart');
    chartEl.addEventListener('mousedown', (e) => {
      pointerDown.x = e.clientX;
      pointerDown.y = e.clientY;
    });
    chartEl.addEventListener('click', onChartClick);
    let lastWidth = chartEl.clientWidth;
    new ResizeObserver(() => {
      const w = chartEl.clientWidth;
      if (plot && w > 0 && Math.abs(w - lastWidth) > 1) {
        lastWidth = w;
        plot.setSize({ width: Math.max(320, w), height: chartHeight() });
      }
    }).observe(chartEl);
  }

  // ---------------------------------------------------------------- start

  function showError(err) {
    const el = $('error');
    el.hidden = false;
    el.textContent = `This page could not show the data: ${err && err.message ? err.message : err}`;
    console.error(err);
  }

  function start() {
    const t0 = performance.now();
    const text = $('memsnap-data').textContent;
    DATA = JSON.parse(text);
    if (!DATA || !Array.isArray(DATA.runs)) throw new Error('embedded data has no "runs" list');
    if (DATA.version !== 1) console.warn(`memsnap data version ${DATA.version}; this page reads version 1`);
    RUNS = DATA.runs.map((raw, i) => Object.assign(T.prepareRun(raw, i), { color: COLORS[i % COLORS.length], visible: true }));
    // Labels and paths are file names: shown as the text reports show them
    // (T.printable: bidi overrides and control characters escaped), so that
    // a name with U+202E does not read reversed in the cards, legend or title.
    RUNS.forEach((r) => { r.label = T.printable(r.label); r.file = T.printable(r.file); });
    info.groups = RUNS.length > MANY_RUNS ? T.groupRunsByPeak(RUNS) : [];
    const names = T.distinguishingNames(RUNS.map((r) => r.label));
    RUNS.forEach((r, i) => { r.name = names[i]; });
    info.eventDrill = hasEventIndex();
    info.decodeMs = performance.now() - t0;

    $('page-title').textContent = document.title || 'memsnap plot';
    $('page-title').title = document.title;
    const precision = Number(DATA.precision_ms) > 0 ? Number(DATA.precision_ms) : 1;
    state.precisionRequestedMs = precision;
    state.precisionMs = precision;
    state.xMode = hasTime() ? 'time' : 'index';
    readViewFromAddress();
    $('page-meta').textContent = `${RUNS.length} run${RUNS.length === 1 ? '' : 's'} · `
      + `${RUNS.map((r) => `${r.label} (device ${r.device ?? '?'})`).join(' vs ')}`;
    $('footer').textContent = `${DATA.generated_by || 'memsnap'} · `
      + RUNS.map((r) => `${r.label}: ${r.file}`).join(' · ');

    if (hasEventIndex()) {
      $('drill-hint').textContent = hasTime()
        ? 'Click anywhere on the chart to see the allocations live at that time (wall clock) or after that event (event index), grouped by source.'
        : 'Click anywhere on the chart to see the allocations live after that event, grouped by source.';
    } else if (!hasTime()) {
      const missing = RUNS.filter((r) => !r.time).map((r) => r.name);
      $('drill-hint').textContent = `The drill-down needs timestamps (or event indices per allocation); ${missing.join(', ')} ${missing.length === 1 ? 'has' : 'have'} none (PyTorch before 2.2, or no trace events).`;
    }
    renderCards();
    wireControls();
    wireSearch();
    allocView.wire();
    segmentView.wire();
    $('drilldown').tBodies[0].addEventListener('click', (e) => {
      const tr = e.target.closest('tr');
      if (tr && tr.dataset.source != null) openDrillRow(tr);
    });
    wireServedAllocator();
    render();
    showRanks();
    replayClickFromAddress();
    info.ready = true;
    document.body.dataset.ready = 'true';
  }

  try {
    start();
  } catch (err) {
    showError(err);
  }
})();
