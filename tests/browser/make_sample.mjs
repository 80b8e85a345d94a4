#!/usr/bin/env node
// Builds a `memsnap plot`-style page from web/template.html with synthetic data
// and the real uPlot from node_modules, to develop the page without the C++
// producer. No dependencies beyond node itself.
//
//   node tests/browser/make_sample.mjs [--out build/browser/sample.html]
//        [--runs 2] [--allocs 20000] [--no-time] [--no-event-index] [--seed 1]
//   node tests/browser/make_sample.mjs --from page.html --out new.html
//
// --from takes the data (and title) of a page written by `memsnap plot` and
// re-assembles it with the current web/ files: a way to try page changes on
// real data without rebuilding the C++ side.
//
// The module also exports the pieces the browser test uses in --sample mode:
// assemblePage() (the same single-pass substitution the C++ side performs),
// makeRun() (a synthetic run plus the ground truth behind it) and
// expectedLive() (an independent, naive drill-down for comparison).

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { mulberry32 } from '../web/seeded_random.cjs';

const here = path.dirname(fileURLToPath(import.meta.url));
export const ROOT = path.resolve(here, '..', '..');

const KiB = 1024;
const MiB = 1024 * KiB;
const GiB = 1024 * MiB;
const LIVE_U32 = 0xffffffff;

// ---------------------------------------------------------------- page assembly

export function readAssets(root = ROOT) {
  const read = (p) => fs.readFileSync(path.join(root, p), 'utf8');
  return {
    template: read('web/template.html'),
    transformsJs: read('web/transforms.js'),
    appJs: read('web/app.js'),
    appCss: read('web/app.css'),
    uplotJs: read('node_modules/uplot/dist/uPlot.iife.min.js'),
    uplotCss: read('node_modules/uplot/dist/uPlot.min.css'),
  };
}

export function escapeHtml(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
}

// JSON inside <script type="application/json">: "</" must not appear (it could
// close the element) and neither should "<!--" (script data escape states).
// Escaping every "<" as \u003c covers both and is still valid JSON.
export function scriptSafeJson(value) {
  return JSON.stringify(value).replace(/</g, '\\u003c').replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
}

export const PLACEHOLDERS = ['TITLE', 'UPLOT_CSS', 'APP_CSS', 'UPLOT_JS', 'TRANSFORMS_JS', 'APP_JS', 'DATA_JSON'];

// One pass over the template: substituted text is never scanned again, so a
// "{{...}}" inside uPlot, the scripts or the data cannot be replaced by accident.
export function assemblePage(assets, title, data) {
  const values = {
    TITLE: escapeHtml(title),
    UPLOT_CSS: assets.uplotCss,
    APP_CSS: assets.appCss,
    UPLOT_JS: assets.uplotJs,
    TRANSFORMS_JS: assets.transformsJs,
    APP_JS: assets.appJs,
    DATA_JSON: scriptSafeJson(data),
  };
  const seen = new Map(PLACEHOLDERS.map((p) => [p, 0]));
  const out = assets.template.replace(/\{\{([A-Z_]+)\}\}/g, (m, name) => {
    if (!seen.has(name)) throw new Error(`template: unknown placeholder ${m}`);
    seen.set(name, seen.get(name) + 1);
    return values[name];
  });
  for (const [name, n] of seen) if (n !== 1) throw new Error(`template: {{${name}}} appears ${n} times, expected once`);
  return out;
}

// ---------------------------------------------------------------- synthetic data


const SOURCE_NAMES = [
  'forward@attention.py:52', 'forward@attention.py:55', 'forward@mlp.py:23', 'forward@mlp.py:31',
  'forward@layernorm.py:12', 'forward@embedding.py:40', 'backward@attention.py:52', 'backward@mlp.py:23',
  'step@adamw.py:118', 'step@adamw.py:131', 'zero_grad@optimizer.py:88', 'to_device@collate.py:44',
  'train@train.py:171', 'build_model@train.py:140', 'loss@train.py:96', '<no frames>',
  'forward@rotary_données.py:17', 'checkpoint@ckpt.py:9', 'all_reduce@dist.py:77', 'gather@eval.py:33',
  'forward@weird</script><!--name.py:1', 'forward@emoji_\u{1F600}.py:5', 'forward@cjk_\uFF21.py:6',
];

// A run with N allocations over `durationS` seconds. Returns { run, truth }:
// run is the JSON object of the data contract; truth holds the plain arrays.
export function makeRun({ label, file, seed = 1, allocs = 20000, durationS = 2.0, baseline = 3 * GiB,
  steps = 5, oom = false, noTime = false, bucketUs = 1000, growth = 1.0, eventIndex = true } = {}) {
  const rand = mulberry32(seed);
  const durationUs = Math.round(durationS * 1e6);
  const nSources = SOURCE_NAMES.length;
  const weights = SOURCE_NAMES.map((_, i) => 1 / (1 + i) ** 0.8);
  const wsum = weights.reduce((a, b) => a + b, 0);
  const pickSource = () => {
    let r = rand() * wsum;
    for (let i = 0; i < nSources; i++) {
      r -= weights[i];
      if (r <= 0) return i;
    }
    return nSources - 1;
  };
  const sizeOf = () => {
    const e = Math.floor(rand() ** 2.2 * 20); // mostly small, sometimes up to 512 MiB
    return Math.max(512, Math.round((2 ** (9 + e)) * (0.5 + rand()) / 512) * 512);
  };
  const start = new Uint32Array(allocs);
  const end = new Uint32Array(allocs);
  const size = new Float64Array(allocs);
  const source = new Uint32Array(allocs);
  const times = Array.from({ length: allocs }, () => Math.floor(rand() * durationUs)).sort((a, b) => a - b);
  times[0] = 0;
  for (let i = 0; i < allocs; i++) {
    start[i] = times[i];
    size[i] = Math.round(sizeOf() * growth / 512) * 512;
    source[i] = pickSource();
    const r = rand();
    let life;
    if (r < 0.7) life = -Math.log(1 - rand()) * 2000;
    else if (r < 0.93) life = -Math.log(1 - rand()) * 60000;
    else life = Infinity;
    const e = start[i] + Math.max(1, Math.round(life));
    end[i] = Number.isFinite(life) && e <= durationUs ? e : LIVE_U32;
  }
  // Events: alloc at start, free at end (when freed inside the trace); the
  // third entry is the allocation. startEvent/endEvent: event indices (the
  // optional start_event/end_event columns of web/README.md).
  const events = [];
  for (let i = 0; i < allocs; i++) {
    events.push([start[i], size[i], i]);
    if (end[i] !== LIVE_U32) events.push([end[i], -size[i], i]);
  }
  events.sort((a, b) => a[0] - b[0] || b[1] - a[1] || a[2] - b[2]);
  const nEvents = events.length;
  const startEvent = new Uint32Array(allocs);
  const endEvent = new Uint32Array(allocs).fill(LIVE_U32);
  events.forEach(([, sz, i], k) => {
    if (sz > 0) startEvent[i] = k;
    else endEvent[i] = k;
  });
  const deltas = new Float64Array(nEvents);
  let delta = 0;
  let peak = 0;
  for (let k = 0; k < nEvents; k++) {
    delta += events[k][1];
    deltas[k] = delta;
    if (delta > peak) peak = delta;
  }
  // Index buckets.
  const bucketEvents = Math.max(1, Math.ceil(nEvents / 100000));
  const nIndex = Math.ceil(nEvents / bucketEvents);
  const iMin = new Float64Array(nIndex).fill(Infinity);
  const iMax = new Float64Array(nIndex).fill(-Infinity);
  for (let k = 0; k < nEvents; k++) {
    const b = Math.floor(k / bucketEvents);
    if (deltas[k] < iMin[b]) iMin[b] = deltas[k];
    if (deltas[k] > iMax[b]) iMax[b] = deltas[k];
  }
  // Time buckets: the value entering a bucket counts too; empty buckets carry it.
  const lastUs = events[nEvents - 1][0];
  const nTime = noTime ? 0 : Math.floor(lastUs / bucketUs) + 1;
  const tMin = new Float64Array(nTime);
  const tMax = new Float64Array(nTime);
  {
    let k = 0;
    let cur = 0;
    for (let b = 0; b < nTime; b++) {
      let lo = cur;
      let hi = cur;
      const limit = (b + 1) * bucketUs;
      while (k < nEvents && events[k][0] < limit) {
        cur = deltas[k];
        if (cur < lo) lo = cur;
        if (cur > hi) hi = cur;
        k++;
      }
      tMin[b] = lo;
      tMax[b] = hi;
    }
  }
  // Reserved: grows in 20 MiB segments, released at each step end.
  const seg = 20 * MiB;
  const roundSeg = (v) => Math.ceil(v / seg) * seg;
  const stepLen = durationUs / Math.max(1, steps);
  const rT = [0];
  const rB = [roundSeg(baseline)];
  {
    let reserved = rB[0];
    let nextRelease = stepLen;
    for (let k = 0; k < nEvents; k++) {
      const t = events[k][0];
      const abs = baseline + deltas[k];
      if (t >= nextRelease) {
        const shrunk = roundSeg(abs);
        if (shrunk < reserved) {
          reserved = shrunk;
          rT.push(t);
          rB.push(reserved);
        }
        nextRelease += stepLen;
      }
      if (abs > reserved) {
        reserved = roundSeg(abs);
        rT.push(t);
        rB.push(reserved);
      }
    }
  }
  const stepList = [];
  const annotations = [];
  for (let s = 0; s < steps; s++) {
    const a = (s * stepLen) / 1e6;
    const b = ((s + 1) * stepLen) / 1e6;
    stepList.push({ step: s, start_s: a, end_s: s === steps - 1 ? null : b });
    const w = b - a;
    annotations.push({ name: 'forward', start_s: a + 0.02 * w, end_s: a + 0.45 * w });
    annotations.push({ name: 'attention', start_s: a + 0.05 * w, end_s: a + 0.2 * w });
    annotations.push({ name: 'backward', start_s: a + 0.46 * w, end_s: a + 0.85 * w });
    annotations.push({ name: 'optimizer.step', start_s: a + 0.86 * w, end_s: a + 0.97 * w });
  }
  const b64 = (arr) => Buffer.from(arr.buffer, arr.byteOffset, arr.byteLength).toString('base64');
  const f64 = (arr) => b64(Float64Array.from(arr));
  const run = {
    label,
    file: file || `/synthetic/${label}`,
    device: 0,
    stats: {
      absolute_peak: baseline + peak,
      baseline,
      peak_delta: peak,
      alloc_count: allocs,
      unmatched_frees: 0,
      unmatched_free_bytes: 0,
      event_count: nEvents,
      duration_s: noTime ? 0 : lastUs / 1e6,
      has_time: !noTime,
    },
    time_buckets: noTime
      ? { bucket_us: bucketUs, count: 0, min: '', max: '' }
      : { bucket_us: bucketUs, count: nTime, min: b64(tMin), max: b64(tMax) },
    index_buckets: { bucket_events: bucketEvents, count: nIndex, min: b64(iMin), max: b64(iMax) },
    reserved: noTime ? null : { count: rT.length, t_us: f64(rT), bytes: f64(rB) },
    steps: noTime ? [] : stepList,
    annotations: noTime ? [] : annotations,
    oom: oom && !noTime ? [{ t_s: (0.8 * durationUs) / 1e6, requested: 2 * GiB, device_free: 95 * MiB }] : [],
    sources: SOURCE_NAMES,
    lifetimes: {
      count: allocs,
      time_type: 'u32',
      start_us: b64(start),
      end_us: b64(end),
      size: b64(size),
      source: b64(source),
      ...(eventIndex ? { start_event: b64(startEvent), end_event: b64(endEvent) } : {}),
    },
  };
  return {
    run,
    truth: { start, end, startEvent, endEvent, size, source, sources: SOURCE_NAMES, durationS: lastUs / 1e6, eventCount: nEvents, baseline, peak, deltas },
  };
}

export function makeData(runs, precisionMs = 1.0) {
  return { version: 1, generated_by: 'make_sample.mjs (synthetic)', precision_ms: precisionMs, runs };
}

// Naive reference for the drill-down: what was live at T seconds, by source,
// sorted like `memsnap replay-to-time --json` (bytes desc, then name in UTF-8
// byte order; two runs: name order, then |B - A| desc, stable).
export function expectedLive(truths, T) {
  return expectedLiveBy(truths, Math.round(T * 1e6), (t) => [t.start, t.end]);
}

// The same after event E (0-based) of each run's own trace.
export function expectedLiveAtEvent(truths, E) {
  return expectedLiveBy(truths, Number(E), (t) => [t.startEvent, t.endEvent]);
}

function expectedLiveBy(truths, x, columns) {
  const per = truths.map((t) => {
    const [start, end] = columns(t);
    const m = new Map();
    let liveCount = 0;
    let liveBytes = 0;
    for (let i = 0; i < start.length; i++) {
      if (start[i] <= x && (end[i] === LIVE_U32 || end[i] > x)) {
        const name = t.sources[t.source[i]];
        const row = m.get(name) || { bytes: 0, count: 0 };
        row.bytes += t.size[i];
        row.count += 1;
        m.set(name, row);
        liveCount += 1;
        liveBytes += t.size[i];
      }
    }
    return { m, liveCount, liveBytes };
  });
  const names = [...new Set(per.flatMap((p) => [...p.m.keys()]))];
  const byUtf8 = (a, b) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
  const rows = names.map((source) => ({
    source,
    bytes: per.map((p) => (p.m.get(source) || { bytes: 0 }).bytes),
    count: per.map((p) => (p.m.get(source) || { count: 0 }).count),
  }));
  if (truths.length === 1) rows.sort((a, b) => b.bytes[0] - a.bytes[0] || byUtf8(a.source, b.source));
  else {
    rows.sort((a, b) => byUtf8(a.source, b.source));
    rows.sort((a, b) => Math.abs(b.bytes[1] - b.bytes[0]) - Math.abs(a.bytes[1] - a.bytes[0]));
  }
  return { rows, live: per.map((p) => ({ count: p.liveCount, bytes: p.liveBytes })) };
}

// ---------------------------------------------------------------- CLI

function parseArgs(argv) {
  const opts = { out: path.join(ROOT, 'build', 'browser', 'sample.html'), runs: 2, allocs: 20000, noTime: false, eventIndex: true, seed: 1, from: null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--out') opts.out = argv[++i];
    else if (a === '--runs') opts.runs = Number(argv[++i]);
    else if (a === '--allocs') opts.allocs = Number(argv[++i]);
    else if (a === '--seed') opts.seed = Number(argv[++i]);
    else if (a === '--no-time') opts.noTime = true;
    else if (a === '--no-event-index') opts.eventIndex = false;
    else if (a === '--from') opts.from = argv[++i];
    else if (a === '-h' || a === '--help') {
      console.log('usage: make_sample.mjs [--out PATH] [--runs N] [--allocs N] [--seed S] [--no-time] [--no-event-index] | --from PAGE.html --out PATH');
      process.exit(0);
    } else throw new Error(`unknown argument ${a}`);
  }
  return opts;
}

// Data and title of a page written by `memsnap plot`.
export function extractPage(html) {
  const data = html.match(/<script id="memsnap-data" type="application\/json">([\s\S]*?)<\/script>/);
  if (!data) throw new Error('no <script id="memsnap-data"> in the page');
  const title = html.match(/<title>([\s\S]*?)<\/title>/);
  const unescape = (s) => s.replace(/&(amp|lt|gt|quot|#39);/g, (m, e) => ({ amp: '&', lt: '<', gt: '>', quot: '"', '#39': "'" })[e]);
  return { data: JSON.parse(data[1]), title: title ? unescape(title[1]) : 'memsnap' };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const opts = parseArgs(process.argv.slice(2));
  if (opts.from) {
    const { data, title } = extractPage(fs.readFileSync(opts.from, 'utf8'));
    const html = assemblePage(readAssets(), title, data);
    fs.mkdirSync(path.dirname(opts.out), { recursive: true });
    fs.writeFileSync(opts.out, html);
    console.log(`wrote ${opts.out} (${(html.length / MiB).toFixed(2)} MiB) from the data of ${opts.from}`);
    process.exit(0);
  }
  const runs = [];
  for (let r = 0; r < opts.runs; r++) {
    runs.push(makeRun({
      label: `${String.fromCharCode(97 + r)}.pickle`,
      seed: opts.seed + r,
      allocs: Math.round(opts.allocs * (1 + 0.3 * r)),
      durationS: 2 + r * 0.6,
      baseline: (3 + r) * GiB,
      growth: 1 + 0.25 * r,
      oom: r === opts.runs - 1,
      noTime: opts.noTime,
      eventIndex: opts.eventIndex,
    }).run);
  }
  const html = assemblePage(readAssets(), `memsnap: ${runs.map((r) => r.label).join(' vs ')}`, makeData(runs));
  fs.mkdirSync(path.dirname(opts.out), { recursive: true });
  fs.writeFileSync(opts.out, html);
  console.log(`wrote ${opts.out} (${(html.length / MiB).toFixed(2)} MiB)`);
}
