#!/usr/bin/env node
// Browser test of `memsnap plot`: opens the generated HTML in headless Chromium
// (Debian's /usr/bin/chromium driven by playwright-core) and checks that
//   - the page loads with no console error, no page error and no network
//     request other than the file itself;
//   - every toggle (x mode, y mode, precision, steps, annotations) changes the chart;
//   - the plotted max of every run equals its absolute peak at every precision;
//   - a click on the chart lists exactly what `memsnap replay-to-time --json`
//     reports at the clicked time (two files, then one file);
//   - in the event-index view a click lists what was live after that event
//     when the data has per-allocation event indices (compared with
//     replay-to-time at that event's time where no later event shares it),
//     and says why not otherwise;
//   - long labels (file names) never make the page wider than the window, the
//     cards show the part that tells them apart, the precision note is one
//     consistent sentence; a very short trace gets sensible x ticks;
//   - real fixtures (multi-device with an OOM, expandable segments, no time_us,
//     segments only) open cleanly.
//
//   node tests/browser/test_plot.mjs --memsnap build/memsnap --out-dir build/browser
//        [--only generated|fixtures ...] [--fixtures ../shared/fixtures/real]
//        [--chromium /usr/bin/chromium] [--python python3] [--sample] [--reassemble]
//
// --only runs the pages of generated snapshots or those of the real fixtures
// (default: both); CTest registers them as `browser` and `browser_fixtures`.
// --sample checks the page against synthetic data built by make_sample.mjs
// (no memsnap needed; expected drill-downs come from a naive JS replay).
// --reassemble re-wraps the data of every page memsnap writes with the current
// web/ files (for working on web/ without rebuilding memsnap; not for CI).
// Exit status: 1 when a check failed, else 77 (CTest: skipped) when the
// fixtures are selected but their folder is absent, else 0. A fixture missing
// from a folder that exists is a failure.

import { spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';
import { createRequire } from 'node:module';
import {
  PLACEHOLDERS, ROOT, assemblePage, expectedLive, expectedLiveAtEvent, extractPage, makeData, makeRun, readAssets, scriptSafeJson,
} from './make_sample.mjs';

const MT = createRequire(import.meta.url)('../../web/transforms.js');

const started = Date.now();
const HUGE_TOP = '100000000';

// ---------------------------------------------------------------- arguments

const PARTS = ['generated', 'fixtures'];
const SKIPPED = 77; // CTest's SKIP_RETURN_CODE for these tests

function parseArgs(argv) {
  const opts = {
    memsnap: path.join(ROOT, 'build', 'memsnap'),
    outDir: path.join(ROOT, 'build', 'browser'),
    fixtures: path.join(ROOT, '..', 'shared', 'fixtures', 'real'),
    only: null,
    chromium: '/usr/bin/chromium',
    python: 'python3',
    sample: false,
    reassemble: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--memsnap') opts.memsnap = path.resolve(value());
    else if (a === '--out-dir') opts.outDir = path.resolve(value());
    else if (a === '--fixtures') opts.fixtures = path.resolve(value());
    else if (a === '--only') {
      opts.only = [value()];
      while (i + 1 < argv.length && !argv[i + 1].startsWith('-')) opts.only.push(argv[++i]);
      const unknown = opts.only.filter((part) => !PARTS.includes(part));
      if (unknown.length) usage(`--only takes ${PARTS.join(' or ')}, not ${unknown.join(' ')}`);
    }
    else if (a === '--chromium') opts.chromium = value();
    else if (a === '--python') opts.python = value();
    else if (a === '--sample') opts.sample = true;
    else if (a === '--reassemble') opts.reassemble = true;
    else if (a === '-h' || a === '--help') usage(null);
    else usage(`unknown argument ${a}`);
  }
  opts.only = opts.only || PARTS;
  return opts;
}

function usage(error) {
  const text = 'usage: test_plot.mjs --memsnap PATH --out-dir DIR [--only generated|fixtures ...] [--fixtures DIR] [--chromium PATH] [--python PY] [--sample] [--reassemble]';
  if (error) {
    console.error(`test_plot: ${error}\n${text}`);
    process.exit(2);
  }
  console.log(text);
  process.exit(0);
}

const opts = parseArgs(process.argv.slice(2));

// ---------------------------------------------------------------- reporting

const failures = [];
let checks = 0;

function check(cond, message) {
  checks += 1;
  if (!cond) {
    failures.push(message);
    console.log(`  FAIL ${message}`);
  }
  return !!cond;
}

function section(title) {
  console.log(`\n== ${title}`);
}

function fatal(message) {
  console.error(`test_plot: ${message}`);
  process.exit(1);
}

// ---------------------------------------------------------------- processes

function run(cmd, args, what) {
  const res = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
  if (res.error) throw new Error(`${what}: cannot run ${cmd}: ${res.error.message}`);
  if (res.status !== 0) {
    throw new Error(`${what}: ${[cmd, ...args].join(' ')} exited with ${res.status}\n${(res.stderr || '').trim()}`);
  }
  return res.stdout;
}

// The same, without blocking: to run the generator twice in parallel.
function runAsync(cmd, args, what) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d) => { stderr += d; });
    child.on('error', (err) => reject(new Error(`${what}: cannot run ${cmd}: ${err.message}`)));
    child.on('close', (code) => (code === 0 ? resolve()
      : reject(new Error(`${what}: ${[cmd, ...args].join(' ')} exited with ${code}\n${stderr.trim()}`))));
  });
}

function memsnap(args, what) {
  const out = run(opts.memsnap, args, what);
  const o = args.indexOf('-o');
  if (opts.reassemble && args[0] === 'plot' && o >= 0) {
    const { data, title } = extractPage(fs.readFileSync(args[o + 1], 'utf8'));
    fs.writeFileSync(args[o + 1], assemblePage(readAssets(), title, data));
  }
  return out;
}

function memsnapJson(args, what) {
  const out = memsnap([...args, '--json'], what);
  try {
    return JSON.parse(out);
  } catch (err) {
    throw new Error(`${what}: output is not JSON: ${err.message}`);
  }
}

function hasPlotCommand() {
  if (!fs.existsSync(opts.memsnap)) return false;
  const res = spawnSync(opts.memsnap, ['plot', '--help'], { encoding: 'utf8' });
  return res.status === 0 && /plot/i.test(res.stdout) && /-o|--output/.test(res.stdout);
}

// ---------------------------------------------------------------- browser helpers

const CHROMIUM_ARGS = ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

const sha = (s) => crypto.createHash('sha256').update(s).digest('hex').slice(0, 16);
const nextFrame = (page) => page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));

async function openPage(browser, file, name, viewport = { width: 1280, height: 800 }) {
  const url = pathToFileURL(file).href;
  const context = await browser.newContext({ viewport, deviceScaleFactor: 1 });
  // Belt and braces: nothing may leave the machine even if the page tried.
  await context.route(/^(https?|wss?|ftp):/i, (route) => route.abort());
  const page = await context.newPage();
  const problems = [];
  page.on('console', (msg) => {
    if (msg.type() === 'error') problems.push(`console error: ${msg.text()}`);
  });
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('request', (req) => {
    if (req.url() !== url) problems.push(`network request: ${req.url()}`);
  });
  const t0 = Date.now();
  await page.goto(url, { waitUntil: 'load', timeout: 30000 });
  await page.waitForFunction(() => document.body.dataset.ready === 'true' || !document.getElementById('error').hidden,
    null, { timeout: 10000 }).catch(() => {});
  const loadMs = Date.now() - t0;
  const error = await page.evaluate(() => (document.getElementById('error').hidden ? '' : document.getElementById('error').textContent));
  check(!error, `${name}: page shows an error: ${error}`);
  check(await page.evaluate(() => document.body.dataset.ready === 'true'), `${name}: page never became ready`);
  await nextFrame(page);
  console.log(`  ${name}: ready in ${loadMs} ms`);
  return { page, context, problems, name };
}

// plot --whatif: the dash-dot line peaks where `whatif --set` says the model
// did, in the lines and the stacked views; the legend reads it at the cursor;
// the note says what it is.
async function testWhatIfLine(browser, file, table) {
  const p = await openPage(browser, file, path.basename(file));
  const { page } = p;
  try {
    const want = table.runs[1].peak_reserved;
    const drawn = () => page.evaluate(() => {
      const u = window.memsnapPlot;
      const i = u.series.findIndex((s) => / \(reserved under expandable_segments:True\)$/.test(String(s.label)));
      let max = -Infinity;
      if (i > 0) for (const v of u.data[i]) if (v != null && v > max) max = v;
      return { i, max, dash: i > 0 ? Array.from(u.series[i].dash || []) : [], note: document.getElementById('view-note').textContent };
    });
    for (const [stack, x] of [['lines', 'time'], ['category', 'time'], ['lines', 'index'], ['category', 'index']]) {
      await page.selectOption('#view-mode', stack);
      await page.selectOption('#x-mode', x);
      await nextFrame(page);
      const state = await pageState(page);
      check(state.stack === stack && state.xMode === x && state.yMode === 'absolute',
        `${p.name}: not in the absolute ${x} ${stack} view: ${JSON.stringify(state)}`);
      const got = await drawn();
      const where = `${p.name} (${stack}, ${x})`;
      check(got.i > 0 && got.dash.length === 4, `${where}: no dash-dot line for expandable_segments:True`);
      check(got.max === want, `${where}: the simulated line peaks at ${got.max}, whatif --set says ${want}`);
      check(/dash-dot: reserved memory as memsnap's model of PyTorch's caching allocator has it under expandable_segments:True \(peak /.test(got.note),
        `${where}: the note does not say what the line is: ${got.note}`);
      const box = await page.evaluate(() => {
        const r = window.memsnapPlot.over.getBoundingClientRect();
        return { x: r.left, y: r.top, w: r.width, h: r.height };
      });
      await page.mouse.move(box.x + box.w * 0.6, box.y + box.h * 0.5);
      await nextFrame(page);
      const read = await page.evaluate(() => (document.getElementById('legend-whatif-0') || {}).textContent || '');
      check(/^[\d.]+ [KMG]?i?B$/.test(read), `${where}: the legend reads the simulated line as "${read}"`);
    }
    await page.screenshot({ path: path.join(opts.outDir, 'whatif.png') });
  } finally {
    await closePage(p);
  }
}

async function closePage(p) {
  await nextFrame(p.page).catch(() => {});
  check(p.problems.length === 0, `${p.name}: ${p.problems.join('; ')}`);
  await p.context.close();
}

const pageState = (page) => page.evaluate(() => ({ ...window.memsnapState }));
const pageInfo = (page) => page.evaluate(() => JSON.parse(JSON.stringify(window.memsnapInfo)));
const dataHash = async (page) => sha(await page.evaluate(() => (window.memsnapPlot ? JSON.stringify(window.memsnapPlot.data) : 'none')));
const canvasHash = async (page) => {
  await nextFrame(page);
  return sha(await page.evaluate(() => (window.memsnapPlot ? window.memsnapPlot.ctx.canvas.toDataURL() : 'none')));
};

// Max of each run's "max" series and the run's stats, as the page sees them.
async function plottedPeaks(page) {
  return page.evaluate(() => {
    const data = JSON.parse(document.getElementById('memsnap-data').textContent);
    const u = window.memsnapPlot;
    const out = [];
    if (!u) return out;
    u.series.forEach((s, i) => {
      if (i === 0 || !String(s.label).endsWith(' (max)')) return;
      const label = String(s.label).slice(0, -' (max)'.length);
      const run = data.runs.find((r) => r.label === label);
      let max = -Infinity;
      for (const v of u.data[i]) if (v != null && v > max) max = v;
      out.push({ label, max, stats: run ? run.stats : null });
    });
    return out;
  });
}

async function checkPeaks(page, name, what) {
  const state = await pageState(page);
  const peaks = await plottedPeaks(page);
  check(peaks.length > 0, `${name} (${what}): no series plotted`);
  for (const p of peaks) {
    if (!p.stats) continue;
    const expected = state.yMode === 'absolute' ? Number(p.stats.absolute_peak) : Number(p.stats.peak_delta);
    const got = state.yMode === 'absolute' ? Math.max(p.max, Number(p.stats.baseline)) : Math.max(p.max, 0);
    check(got === expected, `${name} (${what}): run ${p.label}: plotted max ${got} != ${state.yMode === 'absolute' ? 'absolute_peak' : 'peak_delta'} ${expected}`);
  }
}

async function selectAndWait(page, id, value, key) {
  await page.selectOption(`#${id}`, value);
  await page.waitForFunction(([k, v]) => window.memsnapState[k] === v, [key, value], { timeout: 5000 }).catch(() => {});
  await nextFrame(page);
}

async function setPrecision(page, ms) {
  await page.fill('#precision', String(ms));
  await page.press('#precision', 'Enter');
  await page.waitForFunction((v) => window.memsnapState.precisionRequestedMs === v, ms, { timeout: 5000 }).catch(() => {});
  await nextFrame(page);
}

// Clicks the plot at a fraction of its width; returns the time the page used
// (`key` clickedEvent: the event index, in the event-index view).
async function clickChart(page, fraction, key = 'clickedTime') {
  const before = await page.evaluate((k) => document.body.dataset[k] || '', key);
  await page.evaluate(() => window.scrollTo(0, 0));
  const box = await page.evaluate(() => {
    const r = window.memsnapPlot.over.getBoundingClientRect();
    return { x: r.left, y: r.top, w: r.width, h: r.height };
  });
  await page.mouse.click(box.x + box.w * fraction, box.y + box.h * 0.6);
  await page.waitForFunction(([k, b]) => (document.body.dataset[k] || '') !== b, [key, before], { timeout: 5000 }).catch(() => {});
  return page.evaluate((k) => document.body.dataset[k] || null, key);
}

// The drill-down as the page shows it: `rows` are the trace's allocations
// (what replay-to-time lists), `unlisted` the rows below them (memory from
// before the trace, reused addresses), `live` each run's summary with the
// total it states (the line's absolute value).
async function drilldownFromPage(page, nRuns) {
  return page.evaluate((n) => {
    const read = (tr) => ({
      source: tr.dataset.source,
      bytes: Array.from({ length: n }, (_, r) => Number(tr.getAttribute(`data-bytes-${r}`))),
      count: Array.from({ length: n }, (_, r) => Number(tr.getAttribute(`data-count-${r}`))),
    });
    const rows = [...document.querySelectorAll('#drilldown tbody tr[data-source]:not([data-unlisted])')].map(read);
    const unlisted = [...document.querySelectorAll('#drilldown tbody tr[data-source][data-unlisted]')].map(read);
    const live = [...document.querySelectorAll('#drill-summary [data-run]')].map((el) => ({
      count: Number(el.dataset.liveCount),
      bytes: Number(el.dataset.liveBytes),
      total: el.dataset.totalBytes == null ? null : Number(el.dataset.totalBytes),
      text: el.textContent,
    }));
    return { rows, unlisted, live, ms: Number(document.body.dataset.drilldownMs) };
  }, nRuns);
}

// The plotted line of each run (by label) at time T (seconds; wall-clock
// view): { min, max } of the display bucket that holds T.
async function plottedAt(page, T) {
  return page.evaluate((t) => {
    const u = window.memsnapPlot;
    const xs = u.data[0];
    let j = -1;
    for (let i = 0; i < xs.length; i++) if (xs[i] <= t + 1e-9) j = i;
    const out = {};
    u.series.forEach((s, i) => {
      const m = / \((max|min)\)$/.exec(String(s.label));
      if (i === 0 || !m) return;
      const label = String(s.label).slice(0, -m[0].length);
      (out[label] = out[label] || {})[m[1]] = j >= 0 ? u.data[i][j] : null;
    });
    return out;
  }, Number(T));
}

// The drill-down adds up to the line: for each run, the rows (the trace's
// allocations and the unlisted ones) sum to the total the summary states,
// which is replay-to-time's absolute (baseline + delta) at the moment, and
// lies between the min and max the chart plots for that moment's bucket
// (`plotted`, by run label, when given).
function checkAddsUp(where, got, absolute, plotted = null, labels = []) {
  absolute.forEach((want, r) => {
    const live = got.live[r] || {};
    const listed = got.rows.reduce((a, row) => a + row.bytes[r], 0);
    const unlisted = (got.unlisted || []).reduce((a, row) => a + row.bytes[r], 0);
    check(live.total === want, `${where}: run ${r}: the drill-down states ${live.total} bytes in all, the line (replay-to-time absolute) is ${want}: "${live.text}"`);
    check(listed + unlisted === want, `${where}: run ${r}: its rows sum to ${listed} + ${unlisted} = ${listed + unlisted} bytes, the line is ${want}`);
    const line = plotted && plotted[labels[r]];
    if (line && line.max != null) {
      check(line.min <= want && want <= line.max, `${where}: run ${r}: ${want} bytes lies outside the plotted bucket [${line.min}, ${line.max}]`);
    }
  });
}

function compareDrilldown(name, got, expected) {
  const where = `${name}`;
  check(got.rows.length === expected.rows.length,
    `${where}: ${got.rows.length} source rows on the page, ${expected.rows.length} expected`);
  const n = Math.min(got.rows.length, expected.rows.length);
  let bad = 0;
  for (let i = 0; i < n && bad < 5; i++) {
    const g = got.rows[i];
    const e = expected.rows[i];
    const same = g.source === e.source
      && g.bytes.every((b, r) => b === e.bytes[r])
      && g.count.every((c, r) => c === e.count[r]);
    if (!same) {
      bad += 1;
      check(false, `${where}: row ${i} differs: page ${JSON.stringify(g)} vs expected ${JSON.stringify(e)}`);
    }
  }
  if (bad === 0) checks += 1;
  expected.live.forEach((e, r) => {
    const g = got.live[r] || {};
    check(g.count === e.count, `${where}: run ${r}: live count ${g.count} on the page, ${e.count} expected`);
    if (e.bytes != null) check(g.bytes === e.bytes, `${where}: run ${r}: live bytes ${g.bytes} on the page, ${e.bytes} expected`);
  });
  if (expected.absolute) checkAddsUp(where, got, expected.absolute, expected.plotted, expected.labels);
  check(got.ms < 200, `${where}: drill-down took ${got.ms} ms (limit 200 ms)`);
  const extra = got.unlisted && got.unlisted.length ? ` + ${got.unlisted.length} rows from before the trace` : '';
  console.log(`  ${where}: ${got.rows.length} sources match${extra}${expected.absolute ? ', adding up to the line' : ''} (${got.ms.toFixed(1)} ms in the page)`);
}

// What `memsnap replay-to-time --json` says, in the page's row shape.
function expectedFromMemsnap(files, T, device) {
  const args = ['replay-to-time', ...files, '--time', T, '--top', HUGE_TOP];
  if (device != null) args.push('--device', String(device));
  const j = memsnapJson(args, `replay-to-time at ${T}`);
  if (files.length === 1) {
    return {
      rows: j.sources.map((s) => ({ source: s.source, bytes: [s.bytes], count: [s.count] })),
      live: [{ count: j.live_count, bytes: j.live_bytes }],
      absolute: [j.absolute],
    };
  }
  return {
    rows: j.sources.map((s) => ({ source: s.source, bytes: [s.bytes_a, s.bytes_b], count: [s.count_a, s.count_b] })),
    live: [{ count: j.live_count_a }, { count: j.live_count_b }],
    absolute: [j.absolute_a, j.absolute_b],
  };
}

// ---------------------------------------------------------------- event-index drill-down

const LIVE_U32 = 0xffffffff;

function listEvents(file, device) {
  const args = ['events', file];
  if (device != null) args.push('--device', String(device));
  return memsnapJson(args, `events ${path.basename(file)}`);
}

// The event index of every allocation and of the event that ended it, rebuilt
// from `memsnap events --json` with the replay's rules (include/memsnap/replay.h):
// an alloc records its address and ends a live allocation at the same address,
// free_completed ends the one at its address. In alloc order, as the page's
// lifetimes are. This is what lifetimes.start_event/end_event hold (web/README.md).
function eventColumnsFromListing(listing) {
  const live = new Map();
  const start = [];
  const end = [];
  for (const e of listing.events) {
    if (e.action === 'alloc') {
      const prev = live.get(e.addr);
      if (prev !== undefined) end[prev] = e.index;
      live.set(e.addr, start.length);
      start.push(e.index);
      end.push(LIVE_U32);
    } else if (e.action === 'free_completed') {
      const o = live.get(e.addr);
      if (o !== undefined) {
        end[o] = e.index;
        live.delete(e.addr);
      }
    }
  }
  return { start, end };
}

const b64u32 = (arr) => Buffer.from(Uint32Array.from(arr).buffer).toString('base64');
function decodeColumn(b64, type) {
  const bytes = Uint8Array.from(Buffer.from(b64 || '', 'base64'));
  return Array.from(type === 'f64' ? new Float64Array(bytes.buffer) : new Uint32Array(bytes.buffer));
}

// The page memsnap wrote, with lifetimes.start_event/end_event rebuilt from
// `memsnap events` when its data has none (memsnap 0.1.0): only the data
// changes, the page's own scripts stay. Checks that the rebuilt columns fit the
// data (one per lifetime, the alloc's time is start_us) and, where memsnap
// already writes the columns, that they are the rebuilt ones.
function withEventColumns(htmlFile, outFile, listings) {
  const html = fs.readFileSync(htmlFile, 'utf8');
  const { data } = extractPage(html);
  let native = true;
  data.runs.forEach((run, r) => {
    const listing = listings[r];
    const cols = eventColumnsFromListing(listing);
    const life = run.lifetimes;
    const what = `${path.basename(htmlFile)} run ${r}`;
    if (!check(cols.start.length === Number(life.count), `${what}: ${cols.start.length} allocs in memsnap events, ${life.count} lifetimes in the page`)) return;
    const startUs = decodeColumn(life.start_us, life.time_type);
    const t0 = (listing.events.find((e) => e.time_us > 0) || { time_us: 0 }).time_us;
    const timeOf = (k) => (listing.events[k].time_us > 0 ? listing.events[k].time_us - t0 : 0);
    const bad = cols.start.findIndex((k, i) => timeOf(k) !== startUs[i]);
    check(bad < 0, `${what}: lifetime ${bad} starts at ${startUs[bad]} us in the page, its alloc (event ${cols.start[bad]}) at ${bad >= 0 ? timeOf(cols.start[bad]) : ''} us`);
    if (typeof life.start_event === 'string') {
      check(decodeColumn(life.start_event, 'u32').every((v, i) => v === cols.start[i])
        && decodeColumn(life.end_event, 'u32').every((v, i) => v === cols.end[i]),
      `${what}: memsnap's start_event/end_event differ from the ones rebuilt from memsnap events`);
    } else {
      native = false;
      life.start_event = b64u32(cols.start);
      life.end_event = b64u32(cols.end);
    }
  });
  const out = html.replace(/(<script id="memsnap-data" type="application\/json">)[\s\S]*?(<\/script>)/, (m, a, b) => `${a}${scriptSafeJson(data)}${b}`);
  fs.writeFileSync(outFile, out);
  return native;
}

// What `memsnap replay-to-time FILE` says after event E of one run, where
// that is a time: no later event shares E's time_us (times never decrease,
// replay-to-time applies every event up to the time). null otherwise. E past
// the end: the state at the last event.
function expectedRunAtEvent(file, listing, E, device) {
  const ev = listing.events;
  if (ev.length === 0) return null;
  const k = Math.min(E, ev.length - 1);
  if (!(ev[k].time_us > 0) || (k + 1 < ev.length && ev[k + 1].time_us <= ev[k].time_us)) return null;
  const t0 = ev.find((e) => e.time_us > 0).time_us;
  const T = ((ev[k].time_us - t0) / 1e6).toFixed(6);
  return { T, ...expectedFromMemsnap([file], T, device) };
}

const bySource = (a, b) => (a.source < b.source ? -1 : a.source > b.source ? 1 : 0);

// The event-index view of an open page: the x ticks are whole events, and a
// click lists what was live after the clicked event (expectedEvent(E) gives
// { joint: {rows, live} } for all runs, or { perRun: [{T, rows, live} | null] }),
// or, without event indices in the data, says why it cannot.
async function checkEventDrill(page, name, nRuns, expectedEvent) {
  if ((await pageState(page)).xMode !== 'index') await selectAndWait(page, 'x-mode', 'index', 'xMode');
  await checkTicks(page, name, 'event index');
  const eventDrill = (await pageInfo(page)).eventDrill;
  if (expectedEvent) check(eventDrill, `${name}: the data has event indices, the page offers no event-index drill-down`);
  if (!eventDrill) {
    const before = await page.evaluate(() => document.body.dataset.clickedTime || '');
    const box = await page.evaluate(() => { const r = window.memsnapPlot.over.getBoundingClientRect(); return { x: r.left, y: r.top, w: r.width, h: r.height }; });
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.mouse.click(box.x + box.w * 0.5, box.y + box.h * 0.6);
    await nextFrame(page);
    const hint = await page.textContent('#drill-hint');
    check(/event index/.test(hint) && /does not carry/.test(hint), `${name}: a click in the event-index view without event indices says "${hint}"`);
    check(await page.evaluate((b) => !document.body.dataset.clickedEvent && (document.body.dataset.clickedTime || '') === b, before),
      `${name}: a click in the event-index view without event indices changed the drill-down`);
    console.log(`  ${name}: no event indices in the data; the event-index click says why`);
    return;
  }
  let compared = 0;
  for (const fraction of [0.3, 0.72, 0.97]) {
    const E = await clickChart(page, fraction, 'clickedEvent');
    if (!check(E != null && /^\d+$/.test(E), `${name}: click at ${fraction} of the width in the event-index view set no clickedEvent (${E})`)) continue;
    const heading = await page.textContent('#drill-heading');
    check(heading.includes(`after event ${MT.formatCount(Number(E))}`), `${name}: drill-down heading "${heading}" for event ${E}`);
    const got = await drilldownFromPage(page, nRuns);
    if (!expectedEvent) { // nothing to compare with (a file without timestamps)
      check(got.live.length === nRuns, `${name}: no drill-down summary after event ${E}`);
      compared += 1;
      continue;
    }
    const want = expectedEvent(Number(E));
    if (want.joint) {
      compareDrilldown(`${name} after event ${E}`, got, want.joint);
      compared += 1;
    } else {
      want.perRun.forEach((w, r) => {
        if (!w) return;
        const one = (row) => ({ source: row.source, bytes: [row.bytes[r]], count: [row.count[r]] });
        const mine = got.rows.filter((row) => row.count[r] > 0).map(one).sort(bySource);
        compareDrilldown(`${name} run ${r} after event ${E} (replay-to-time --time ${w.T})`,
          { rows: mine, unlisted: got.unlisted.map(one), live: [got.live[r]], ms: got.ms },
          { rows: w.rows.filter((row) => row.count[0] > 0).sort(bySource), live: w.live, absolute: w.absolute });
        compared += 1;
      });
    }
  }
  check(compared > 0, `${name}: no event-index click could be compared`);
}

// The x tick labels of the last draw: at least two, none repeated, whole
// event indices in the event-index view.
async function checkTicks(page, name, what) {
  await nextFrame(page);
  const ticks = await page.evaluate(() => window.memsnapInfo.xTicks || []);
  const shown = ticks.filter((t) => t !== '');
  check(shown.length >= 2, `${name} (${what}): ${shown.length} x tick labels: ${JSON.stringify(ticks)}`);
  check(new Set(shown).size === shown.length, `${name} (${what}): repeated x tick labels: ${JSON.stringify(ticks)}`);
  if ((await pageState(page)).xMode === 'index') {
    const whole = (t) => /^-?\d{1,3}(,\d{3})*$/.test(t) || (/^-?\d+(\.\d+)?M$/.test(t) && Number.isInteger(Math.round(parseFloat(t) * 1e6 * 1e3) / 1e3));
    check(shown.every(whole), `${name} (${what}): x tick labels that are not whole event indices: ${JSON.stringify(ticks)}`);
  }
  return ticks;
}

// The precision note after asking for `askedMs`: one sentence, "asked for X
// ms, showing Y ms, <why>", Y what is drawn, no raw float.
async function checkPrecisionNote(page, name, askedMs, why) {
  if (askedMs != null) await setPrecision(page, askedMs);
  const state = await pageState(page);
  const note = (await page.textContent('#precision-note')).trim();
  const where = `${name}: precision note "${note}"`;
  if (askedMs == null && note === '') return note;
  check(note !== '' && (await page.isVisible('#precision-note')), `${name}: no visible precision note when asking for ${askedMs} ms (showing ${state.precisionMs} ms)`);
  check((note.match(/showing/g) || []).length === 1 && !/\.\s+\S/.test(note) && !/limited|rounded to|finer than/.test(note),
    `${where}: not one sentence saying what is shown`);
  const m = note.match(/asked for ([\d.,]+) ms, showing ([\d.,]+) ms/);
  if (check(m, `${where}: no "asked for X ms, showing Y ms"`)) {
    check(m[1] === MT.formatMs(state.precisionRequestedMs), `${where}: asked ${state.precisionRequestedMs} ms`);
    check(m[2] === MT.formatMs(state.precisionMs), `${where}: the chart shows ${state.precisionMs} ms`);
    check(m[1] !== m[2], `${where}: asked and shown read the same`);
  }
  const sig = (x) => x.replace(/[,.]/g, '').replace(/^0+/, '').length;
  const raw = (note.match(/\d[\d,]*(\.\d+)?/g) || []).filter((x) => x.includes('.') && sig(x) > 4);
  check(raw.length === 0, `${where}: raw floats ${raw.join(', ')}`);
  if (why) check(why.test(note), `${where}: does not say ${why}`);
  console.log(`  ${name}: ${note}`);
  return note;
}

// ---------------------------------------------------------------- scenarios

const CATEGORY_LAYERS = new Set(['before the trace', 'parameter', 'optimizer_state', 'gradient', 'activation', 'temporary',
  'input', 'autograd_detail', 'communication', 'workspace', 'persistent', 'unknown', 'address reused without a free']);

// The stacked views, for every run, both modes and both x axes: the layers
// stack up to exactly the plotted max line in every bucket (the max line
// comes from the run's own buckets, the layers from the stack data), that
// line's top is the run's absolute peak, the legend names the layers top
// down, the y axis is fixed to absolute; back to lines restores the chart.
// The steadiness of each source that has a column of its own in a run's
// stacked-by-source data (the top sources and the other sources' parts):
// mean / max over the stack buckets of the wall-clock view (else the
// event-index view), computed here from the raw columns.
function sourceSteadiness(runData) {
  const stack = runData.stacks && runData.stacks.source;
  if (!stack) return new Map();
  const key = stack.time && stack.time.count > 0 ? 'time' : 'index';
  const out = new Map();
  const add = (names, view) => names.forEach((n, k) => {
    const v = decodeColumn(view.layers[k], 'f64');
    const max = Math.max(0, ...v);
    out.set(n, max > 0 ? v.reduce((a, b) => a + b, 0) / v.length / max : 0);
  });
  add(stack.layers, stack[key]);
  if (stack.other_parts) add(stack.other_parts.layers, stack.other_parts[key]);
  return out;
}

const FIXED_LAYERS = new Set(['before the trace', 'other sources', 'address reused without a free']);

// The stacked views, for every run, both modes and both x axes: the layers
// stack up to exactly the plotted max line in every bucket (the max line
// comes from the run's own buckets, the layers from the stack data), the
// bottom layer is memory from before the trace and the others go from the
// steadiest up; stacked by source, for several choices of Sources (the
// default 8, one, and all the page holds), that many sources get a layer.
async function checkStacked(page, name, nRuns, xModes) {
  const h0 = await dataHash(page);
  const x0 = (await pageState(page)).xMode;
  const runsData = await page.evaluate(() => JSON.parse(document.getElementById('memsnap-data').textContent).runs);
  let checked = 0;
  for (const mode of ['category', 'source']) {
    await selectAndWait(page, 'view-mode', mode, 'stack');
    for (let r = 0; r < nRuns; r++) {
      if (nRuns > 1) {
        await page.selectOption('#stack-run', String(r));
        await page.waitForFunction((v) => window.memsnapState.stackRun === v, r, { timeout: 5000 }).catch(() => {});
        await nextFrame(page);
      }
      const stackData = runsData[r].stacks && runsData[r].stacks.source;
      const available = stackData
        ? stackData.layers.filter((l) => !FIXED_LAYERS.has(l)).length + (stackData.other_parts ? stackData.other_parts.layers.length : 0) : 0;
      const steady = sourceSteadiness(runsData[r]);
      for (const x of xModes) {
        await selectAndWait(page, 'x-mode', x, 'xMode');
        const choices = mode === 'source' ? [8, 1, available] : [null];
        for (const sources of choices) {
          if (sources != null) {
            // As typing would, also where the control is hidden (no stacked data to draw).
            await page.$eval('#stack-sources', (el, n) => {
              el.value = String(n);
              el.dispatchEvent(new Event('change'));
            }, sources);
            await page.waitForFunction((n) => window.memsnapState.stackSources === n, sources, { timeout: 5000 }).catch(() => {});
            await nextFrame(page);
          }
          const where = `${name} (stacked by ${mode}, run ${r}, ${x}${sources != null ? `, ${sources} sources` : ''})`;
          const got = await page.evaluate(() => {
            const u = window.memsnapPlot;
            const stack = window.memsnapInfo.stack;
            if (!u || !stack) {
              const data = JSON.parse(document.getElementById('memsnap-data').textContent);
              const empty = document.querySelector('#chart .empty');
              return { noChart: true, events: Number(data.runs[window.memsnapState.stackRun].stats.event_count), empty: empty ? empty.textContent : '' };
            }
            const K = stack.layers.length;
            const top = u.data[K];
            const total = u.data[K + 1];
            let bad = -1;
            let max = -Infinity;
            for (let j = 0; j < total.length; j++) {
              if (bad < 0 && top[j] !== total[j]) bad = j;
              if (total[j] != null && total[j] > max) max = total[j];
            }
            const data = JSON.parse(document.getElementById('memsnap-data').textContent);
            const control = document.getElementById('stack-sources-control');
            return {
              run: stack.run, layers: stack.layers, steadiness: stack.steadiness, sources: stack.sources,
              labels: u.series.slice(1, K + 2).map((s) => String(s.label)),
              points: total.length, bad, top: bad >= 0 ? top[bad] : null, total: bad >= 0 ? total[bad] : null, max,
              stats: data.runs[stack.run].stats,
              legend: [...document.querySelectorAll('#legend .legend-item.layer:not(.total) .legend-label')].map((e) => e.textContent),
              runPicker: getComputedStyle(document.getElementById('stack-run-control')).display !== 'none',
              sourcesControl: !!control && getComputedStyle(control).display !== 'none',
              yDisabled: document.getElementById('y-mode').disabled,
            };
          });
          if (got.noChart) {
            // A run without trace events has nothing to stack: the page says so.
            check(got.events === 0 && /No trace events/.test(got.empty), `${where}: no chart or no stacked view drawn (${got.events} events; "${got.empty}")`);
            continue;
          }
          checked += 1;
          check(got.run === r, `${where}: shows run ${got.run}`);
          check(got.points > 1, `${where}: ${got.points} points`);
          check(got.bad < 0, `${where}: bucket ${got.bad}: layers stack to ${got.top}, the max line is at ${got.total}`);
          const peak = Math.max(got.max, Number(got.stats.baseline));
          check(peak === Number(got.stats.absolute_peak), `${where}: the max line peaks at ${peak}, absolute_peak ${got.stats.absolute_peak}`);
          check(got.layers[0] === 'before the trace', `${where}: bottom layer ${got.layers[0]}`);
          check(JSON.stringify(got.labels.slice(0, -1)) === JSON.stringify(got.layers) && got.labels.at(-1).endsWith(' (max)'),
            `${where}: series ${JSON.stringify(got.labels)} for layers ${JSON.stringify(got.layers)}`);
          check(JSON.stringify(got.legend) === JSON.stringify([...got.layers].reverse()), `${where}: legend ${JSON.stringify(got.legend)}`);
          // Long-lived memory at the bottom, what rises and falls on top.
          const s = got.steadiness || [];
          check(s.length === got.layers.length && s.slice(1).every((v, k) => k === 0 || v <= s[k]),
            `${where}: layers above the first are not ordered steadiest first: ${JSON.stringify(got.layers.map((l, k) => [l, s[k]]))}`);
          check(got.sourcesControl === (mode === 'source'), `${where}: the Sources control is ${got.sourcesControl ? 'shown' : 'hidden'}`);
          if (mode === 'category') {
            check(got.layers.every((l) => CATEGORY_LAYERS.has(l)), `${where}: layers ${JSON.stringify(got.layers)}`);
          } else {
            const own = got.layers.filter((l) => !FIXED_LAYERS.has(l));
            check(own.length === Math.min(sources, available) && got.sources && got.sources.available === available,
              `${where}: ${own.length} sources with a layer of their own (${JSON.stringify(got.sources)}), expected ${Math.min(sources, available)} of ${available}`);
            const mine = own.map((l) => steady.get(l));
            check(mine.every((v, k) => v != null && (k === 0 || v <= mine[k - 1] + 1e-12)),
              `${where}: the sources' layers are not in order of their steadiness (mean / max) from the data: ${JSON.stringify(own.map((l, k) => [l, mine[k]]))}`);
          }
          check(got.yDisabled, `${where}: the y axis can be switched to delta`);
          check(got.runPicker === (nRuns > 1), `${where}: run picker ${got.runPicker ? 'shown' : 'hidden'} for ${nRuns} runs`);
        }
      }
    }
  }
  await selectAndWait(page, 'view-mode', 'lines', 'stack');
  await selectAndWait(page, 'x-mode', x0, 'xMode');
  check((await dataHash(page)) === h0, `${name}: chart data differs after the stacked views and back to lines`);
  console.log(`  ${name}: stacked views: layers = max line in ${checked} views`);
}

// The OOM panel: a click away from any oom marker leaves it closed; a click on
// a run's oom marker opens it with what `memsnap oom --json` says (verdict and
// its sentence, the request).
async function testOomPanel(browser, file, files) {
  const p = await openPage(browser, file, `${path.basename(file)} (OOM panel)`);
  const { page } = p;
  try {
    await clickChart(page, 0.3);
    check(await page.evaluate(() => document.getElementById('oom-panel').hidden), `${p.name}: a click away from the oom markers opened the OOM panel`);
    const markers = await page.evaluate(() => JSON.parse(document.getElementById('memsnap-data').textContent).runs.map((r) => r.oom.map((o) => o.t_s)));
    let opened = 0;
    for (let r = 0; r < markers.length; r++) {
      if (markers[r].length === 0) continue;
      const expected = memsnapJson(['oom', files[r]], `oom ${path.basename(files[r])}`).oom;
      const pos = await page.evaluate(([run, t]) => {
        const u = window.memsnapPlot;
        const box = u.over.getBoundingClientRect();
        return { x: box.left + u.valToPos(t, 'x') - 2, y: box.top + box.height * 0.6 };
      }, [r, markers[r][0]]);
      await page.mouse.click(pos.x, pos.y);
      await nextFrame(page);
      const got = await page.evaluate(() => ({
        hidden: document.getElementById('oom-panel').hidden,
        info: window.memsnapInfo.oomPanel,
        sentence: (document.querySelector('#oom-body .verdict.primary') || {}).textContent || '',
        text: document.getElementById('oom-body').textContent,
      }));
      const where = `${p.name}: run ${r}'s oom marker`;
      if (!check(!got.hidden && got.info, `${where}: a click on it opened no OOM panel`)) continue;
      opened += 1;
      check(got.info.run === r && got.info.ordinal === 1 && got.info.verdict === expected.verdict,
        `${where}: panel ${JSON.stringify(got.info)}, memsnap oom says ${expected.verdict}`);
      check(got.sentence === expected.verdicts[0].sentence, `${where}: "${got.sentence}" vs "${expected.verdicts[0].sentence}"`);
      check(got.text.includes(MT.formatBytes(expected.request)), `${where}: the panel does not show the request ${MT.formatBytes(expected.request)}`);
    }
    check(opened > 0, `${p.name}: no run with an oom marker to click`);
    console.log(`  ${p.name}: ${opened} OOM panel(s) equal memsnap oom --json`);
  } finally {
    await closePage(p);
  }
}

// The allocator panel: a click in the wall-clock view shows, per run, the
// allocator at the page's nearest moment; its numbers equal what
// `memsnap segments --time T --json` gives for the time the panel states, and
// it draws one bar per segment it holds, the largest free block outlined.
async function testAllocatorPanel(browser, file, files, expectEveryChange = false) {
  const p = await openPage(browser, file, `${path.basename(file)} (allocator panel)`);
  const { page } = p;
  try {
    // Free memory over time: each run's plotted "free in segments" line
    // peaks where `parse --json` says free memory peaked (its buckets keep
    // the max), and hovering names it with the largest free block.
    const freePeaks = await page.evaluate(() => {
      const u = window.memsnapPlot;
      const out = {};
      u.series.forEach((s, i) => {
        const label = String(s.label);
        if (i === 0 || !label.endsWith(' (free in segments)')) return;
        let max = -Infinity;
        for (const v of u.data[i]) if (v != null && v > max) max = v;
        out[label.slice(0, -' (free in segments)'.length)] = max;
      });
      return out;
    });
    const labels = await page.evaluate(() => JSON.parse(document.getElementById('memsnap-data').textContent).runs.map((r) => r.label));
    labels.forEach((label, r) => {
      const expected = memsnapJson(['parse', files[r]], `parse ${path.basename(files[r])}`).fragmentation;
      check(expected && freePeaks[label] === expected.peak_free,
        `${p.name}: run ${label}'s free-in-segments line peaks at ${freePeaks[label]}, parse says ${expected && expected.peak_free}`);
    });
    const box = await page.evaluate(() => {
      const rect = window.memsnapPlot.over.getBoundingClientRect();
      return { x: rect.left, y: rect.top, w: rect.width, h: rect.height };
    });
    await page.mouse.move(box.x + box.w * 0.5, box.y + box.h * 0.5);
    await nextFrame(page);
    const hovered = await page.evaluate(() => (document.getElementById('legend-free-0') || {}).textContent || '');
    check(/^[\d.]+ [KMG]?i?B \(largest block [\d.]+ [KMG]?i?B\)$/.test(hovered), `${p.name}: hovering shows free in segments as "${hovered}"`);
    // A run of some 10k entries alone on its page fits its every change in
    // the page's budget: the panel then shows the state at the clicked time
    // itself (checked below), not the nearest of a few moments.
    const allocators = await page.evaluate(() => JSON.parse(document.getElementById('memsnap-data').textContent).runs.map((r) => r.allocator));
    if (expectEveryChange) {
      allocators.forEach((a, r) => check(a && a.every_change === true,
        `${p.name}: run ${r} (${files[r] && path.basename(files[r])}) holds ${a && a.moments ? a.moments.length : 0} allocator moments, not one per change`));
    }
    let compared = 0;
    for (const fraction of [0.25, 0.7, 0.4137]) {
      const clicked = await clickChart(page, fraction);
      await page.waitForFunction(() => window.memsnapInfo.allocPanel, null, { timeout: 5000 }).catch(() => {});
      const got = await page.evaluate(() => ({
        hidden: document.getElementById('alloc-panel').hidden,
        info: window.memsnapInfo.allocPanel,
        rows: [...document.querySelectorAll('#alloc-body .alloc-run')].map((el) => ({
          run: Number(el.dataset.run),
          bars: el.querySelectorAll('.alloc-row').length,
          largest: el.querySelectorAll('.blk.largest').length,
          text: el.textContent,
        })),
      }));
      const where = `${p.name}: click at ${fraction}`;
      if (!check(!got.hidden && got.info && got.info.runs.length === files.length, `${where}: no allocator panel for every run (${JSON.stringify(got.info)})`)) continue;
      for (const shown of got.info.runs) {
        const file = files[shown.run];
        const expected = memsnapJson(['segments', '--time', String(shown.t_s), '--top', '100000', file], `segments --time ${shown.t_s}`);
        const t = expected.totals;
        check(expected.position === shown.position, `${where}: run ${shown.run} at entry ${shown.position}, memsnap segments --time ${shown.t_s} at ${expected.position}`);
        check(t.reserved === shown.reserved && t.allocated === shown.allocated && t.awaiting_free === shown.awaiting_free
          && t.free === shown.free && t.largest_free_block === shown.largest_free_block && expected.segment_count === shown.segment_count,
        `${where}: run ${shown.run} panel ${JSON.stringify(shown)} vs memsnap segments ${JSON.stringify({ ...t, segment_count: expected.segment_count })}`);
        const row = got.rows.find((r) => r.run === shown.run);
        check(row && row.bars === shown.bars && row.bars === Math.min(expected.segment_count, 48), `${where}: run ${shown.run} draws ${row && row.bars} bars for ${shown.bars} segments held`);
        const drawnHasLargest = t.largest_free_block > 0 && expected.segments.slice(0, 48).some((g) => g.largest_free_block === t.largest_free_block);
        check(row && row.largest === (drawnHasLargest ? 1 : 0), `${where}: run ${shown.run} outlines ${row && row.largest} largest free blocks, expected ${drawnHasLargest ? 1 : 0}`);
        check(row && row.text.includes(MT.formatBytes(t.reserved)), `${where}: run ${shown.run}'s panel does not show reserved ${MT.formatBytes(t.reserved)}`);
        if (shown.exact && clicked != null && Number(clicked) !== shown.t_s) {
          // The state at the click: what memsnap segments says at that time.
          const atClick = memsnapJson(['segments', '--time', String(clicked), '--top', '100000', file], `segments --time ${clicked}`);
          const c = atClick.totals;
          check(c.reserved === shown.reserved && c.allocated === shown.allocated && c.awaiting_free === shown.awaiting_free
            && c.free === shown.free && c.largest_free_block === shown.largest_free_block && atClick.segment_count === shown.segment_count,
          `${where}: run ${shown.run} panel at t=${clicked} ${JSON.stringify(shown)} vs memsnap segments --time ${clicked} ${JSON.stringify({ ...c, segment_count: atClick.segment_count })}`);
          check(row && row.text.includes(`--time ${clicked}`), `${where}: run ${shown.run}'s panel does not name the clicked time ${clicked}`);
        }
        compared += 1;
      }
    }
    check(compared >= 2, `${p.name}: allocator panels compared: ${compared}`);
    console.log(`  ${p.name}: ${compared} allocator panel(s) equal memsnap segments --time --json`);
    await page.screenshot({ path: path.join(opts.outDir, 'allocator-panel.png'), fullPage: true });
  } finally {
    await closePage(p);
  }
}

// 64 runs: one table instead of 64 cards, the legend in bounded height with
// groups of runs that peak alike (the four stages and the outlier), a group
// chip that hides and shows its runs, and hovering a run that dims the rest.
async function testManyRuns(browser, file) {
  const p = await openPage(browser, file, `${path.basename(file)} (64 runs)`);
  const { page } = p;
  try {
    const layout = await page.evaluate(() => ({
      cards: document.querySelectorAll('#cards .card').length,
      tableRows: [...document.querySelectorAll('#cards .run-table tbody tr')].map((tr) => Number(tr.querySelector('[data-stat="absolute_peak"]') ? tr.dataset.run : -1)),
      legendHeight: document.getElementById('legend').getBoundingClientRect().height,
      groups: window.memsnapInfo.groups.map((g) => g.members.length),
      chips: document.querySelectorAll('#legend .legend-group[data-group]:not([data-group="all"])').length,
      names: window.memsnapPlot ? window.memsnapPlot.series.slice(1).map((s) => s.label) : [],
    }));
    check(layout.cards === 0 && layout.tableRows.length === 64, `${p.name}: ${layout.cards} cards and ${layout.tableRows.length} table rows (expected 0 and 64)`);
    const peaks = await page.evaluate(() => [...document.querySelectorAll('#cards .run-table tbody tr')].map((tr) => {
      const data = JSON.parse(document.getElementById('memsnap-data').textContent);
      return Number(data.runs[Number(tr.dataset.run)].stats.absolute_peak);
    }));
    check(peaks.every((v, i) => i === 0 || peaks[i - 1] >= v), `${p.name}: the run table is not sorted by absolute peak`);
    check(layout.legendHeight <= 200, `${p.name}: the legend is ${layout.legendHeight}px tall`);
    check(JSON.stringify(layout.groups) === JSON.stringify([1, 16, 15, 16, 16]) && layout.chips === 5,
      `${p.name}: legend groups ${JSON.stringify(layout.groups)} (${layout.chips} chips), expected the outlier then four stages [1,16,15,16,16]`);
    check(!layout.names.some((n) => /reserved|free in segments/.test(n)), `${p.name}: reserved/free lines drawn for 64 runs`);
    const maxSeries = async () => page.evaluate(() => window.memsnapPlot.series.filter((s) => / \(max\)$/.test(String(s.label))).length);
    check(await maxSeries() === 64, `${p.name}: ${await maxSeries()} runs plotted, expected 64`);
    await page.click('#legend .legend-group[data-group="1"]');
    await nextFrame(page);
    check(await maxSeries() === 48, `${p.name}: after hiding the 16-run group ${await maxSeries()} runs plotted, expected 48`);
    await page.click('#legend .legend-group[data-group="1"]');
    await nextFrame(page);
    check(await maxSeries() === 64, `${p.name}: after showing the group again ${await maxSeries()} runs plotted`);
    const item = await page.$('#legend .legend-item[data-run="37"]');
    await item.hover();
    await nextFrame(page);
    const focused = await page.evaluate(() => {
      const u = window.memsnapPlot;
      const alphas = u.series.slice(1).map((s) => ({ label: String(s.label), alpha: s.alpha }));
      return { highlighted: window.memsnapInfo.highlighted, own: alphas.filter((a) => a.label.startsWith('snapshot_37.pickle ')).map((a) => a.alpha), dim: alphas.filter((a) => !a.label.startsWith('snapshot_37.pickle ')).every((a) => a.alpha < 0.5) };
    });
    check(focused.highlighted === 37 && focused.own.length > 0 && focused.own.every((a) => a === 1) && focused.dim,
      `${p.name}: hovering rank 37 in the legend: ${JSON.stringify(focused)}`);
    await page.mouse.move(5, 5);
    await nextFrame(page);
    check(await page.evaluate(() => window.memsnapInfo.highlighted === null && window.memsnapPlot.series.slice(1).every((s) => s.alpha === 1)),
      `${p.name}: leaving the legend did not restore every run`);
    await page.screenshot({ path: path.join(opts.outDir, 'many-runs.png') });
    console.log(`  ${p.name}: 64 runs as a table, 5 legend groups, group toggle and hover highlight work`);
  } finally {
    await closePage(p);
  }
}

// The overlay page: toggles, peaks, drill-down. `expected(T)` gives the
// drill-down the page must show at time T.
async function testOverlay(browser, file, nRuns, expected, shotName, expectedEvent = null) {
  const name = path.basename(file);
  const p = await openPage(browser, file, name);
  const { page } = p;
  try {
    let state = await pageState(page);
    check(state.xMode === 'time', `${name}: starts in xMode ${state.xMode}, expected time`);
    check(state.yMode === 'absolute', `${name}: starts in yMode ${state.yMode}, expected absolute`);
    check(state.showAnnotations === false, `${name}: annotations should be off by default`);
    const labels = await page.$$eval('#legend .legend-label', (els) => els.map((e) => e.textContent));
    check(labels.length === nRuns, `${name}: legend has ${labels.length} entries, expected ${nRuns}`);
    const cards = await page.$$eval('#cards .card', (els) => els.map((e) => e.dataset.run));
    check(cards.length === nRuns + (nRuns === 2 ? 1 : 0), `${name}: ${cards.length} stat cards`);
    if (nRuns === 2) check(cards.includes('diff'), `${name}: no B - A card`);
    await checkPeaks(page, name, 'time, absolute, default precision');
    await checkTicks(page, name, 'wall clock');
    let info = await pageInfo(page);
    check(info.markers.steps > 0, `${name}: no ProfilerStep markers drawn`);

    // y mode
    let h0 = await dataHash(page);
    await selectAndWait(page, 'y-mode', 'delta', 'yMode');
    check((await pageState(page)).yMode === 'delta', `${name}: #y-mode did not switch to delta`);
    check((await dataHash(page)) !== h0, `${name}: chart data unchanged after y mode -> delta`);
    await checkPeaks(page, name, 'time, delta');
    await selectAndWait(page, 'y-mode', 'absolute', 'yMode');
    check((await dataHash(page)) === h0, `${name}: chart data differs after y mode back to absolute`);

    // precision: coarser, then finer than the base bucket (clamped, with a note)
    const base = (await pageState(page)).precisionMs;
    h0 = await dataHash(page);
    const coarse = base * 10;
    await setPrecision(page, coarse);
    state = await pageState(page);
    check(Math.abs(state.precisionMs - coarse) < 1e-9, `${name}: precision ${coarse} ms not applied (state says ${state.precisionMs})`);
    check((await dataHash(page)) !== h0, `${name}: chart data unchanged after precision ${coarse} ms`);
    const lens = await page.evaluate(() => window.memsnapPlot.data[0].length);
    await checkPeaks(page, name, `time, absolute, ${coarse} ms`);
    await setPrecision(page, base / 100);
    state = await pageState(page);
    const note = (await page.textContent('#precision-note')).trim();
    check(Math.abs(state.precisionMs - base) < 1e-9, `${name}: precision finer than the base bucket should clamp to ${base} ms, got ${state.precisionMs}`);
    check(note.length > 0 && (await page.isVisible('#precision-note')), `${name}: no visible note when the precision is clamped`);
    check((await page.evaluate(() => window.memsnapPlot.data[0].length)) > lens, `${name}: finer precision did not add points`);
    await setPrecision(page, base);
    check((await dataHash(page)) === h0, `${name}: chart data differs after precision back to ${base} ms`);
    check((await page.textContent('#precision-note')).trim() === '', `${name}: precision note still shown at the base precision`);

    // annotations (canvas only: the data do not change)
    let c0 = await canvasHash(page);
    await page.check('#show-annotations');
    await nextFrame(page);
    check((await pageState(page)).showAnnotations === true, `${name}: #show-annotations did not set showAnnotations`);
    info = await pageInfo(page);
    check(info.markers.annotations > 0, `${name}: no annotation drawn`);
    check((await canvasHash(page)) !== c0, `${name}: canvas unchanged after showing annotations`);
    await page.uncheck('#show-annotations');
    check((await canvasHash(page)) === c0, `${name}: canvas differs after hiding annotations again`);

    // steps
    await page.uncheck('#show-steps');
    check((await canvasHash(page)) !== c0, `${name}: canvas unchanged after hiding profiler steps`);
    await page.check('#show-steps');

    // x mode
    h0 = await dataHash(page);
    await selectAndWait(page, 'x-mode', 'index', 'xMode');
    check((await pageState(page)).xMode === 'index', `${name}: #x-mode did not switch to index`);
    check((await dataHash(page)) !== h0, `${name}: chart data unchanged after x mode -> index`);
    const perRun = await page.evaluate(() => window.memsnapPlot.data[0].length);
    check(perRun <= 2 * 4000 + 2, `${name}: event-index view has ${perRun} points per series (budget about 4000)`);
    await checkPeaks(page, name, 'index, absolute');
    await selectAndWait(page, 'x-mode', 'time', 'xMode');
    check((await dataHash(page)) === h0, `${name}: chart data differs after x mode back to time`);

    await checkStacked(page, name, nRuns, ['time', 'index']);

    // drill-down at three places (the last past the end of the shorter run)
    const runLabels = await page.evaluate(() => JSON.parse(document.getElementById('memsnap-data').textContent).runs.map((r) => r.label));
    for (const fraction of [0.3, 0.72, 0.93]) {
      const T = await clickChart(page, fraction);
      if (!check(T != null && T !== '', `${name}: click at ${fraction} of the width set no document.body.dataset.clickedTime`)) continue;
      const got = await drilldownFromPage(page, nRuns);
      compareDrilldown(`${name} at t=${T}`, got, { ...expected(T), plotted: await plottedAt(page, T), labels: runLabels });
    }

    // drill-down in the event-index view (or why there is none)
    await checkEventDrill(page, name, nRuns, expectedEvent);
    await selectAndWait(page, 'x-mode', 'time', 'xMode');
    await page.evaluate(() => window.scrollTo(0, 0));
    await nextFrame(page);
    if (shotName) {
      await page.screenshot({ path: path.join(opts.outDir, shotName) });
      await page.screenshot({ path: path.join(opts.outDir, shotName.replace(/\.png$/, '-full.png')), fullPage: true });
    }
  } finally {
    await closePage(p);
  }
}

// Long labels (default: file names that differ in the middle): at 1,400 and
// 1,000 px the page is never wider than the window, also with the drill-down
// table open; cards, legend and table show the distinguishing part of each
// label (transforms.js distinguishingNames), the full label in their title;
// the precision note is one consistent sentence (`tinyMs` asks for less than
// the recorded buckets; `why` is what the note must say then).
async function testLongLabels(browser, file, tinyMs, why) {
  for (const width of [1400, 1000]) {
    const p = await openPage(browser, file, `${path.basename(file)} at ${width} px`, { width, height: 900 });
    const { page } = p;
    try {
      const labels = await page.evaluate(() => JSON.parse(document.getElementById('memsnap-data').textContent).runs.map((r) => r.label));
      const names = MT.distinguishingNames(labels);
      const fits = async (what) => {
        const w = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, inner: window.innerWidth }));
        check(w.scroll <= w.inner, `${p.name}: page is ${w.scroll} px wide in a ${w.inner} px window (${what})`);
      };
      await fits('on load');
      const cards = await page.$$eval('#cards .card:not(.diff) .card-title .name', (els) => els.map((e) => ({ text: e.textContent, title: e.title })));
      check(cards.length === labels.length, `${p.name}: ${cards.length} run cards for ${labels.length} labels`);
      check(new Set(cards.map((c) => c.text)).size === cards.length, `${p.name}: two cards read the same: ${JSON.stringify(cards.map((c) => c.text))}`);
      cards.forEach((c, i) => {
        check(c.text === names[i], `${p.name}: card ${i} reads "${c.text}", expected "${names[i]}"`);
        check(c.text.length < labels[i].length, `${p.name}: card ${i} shows the whole label "${c.text}"`);
        check(c.title.includes(labels[i]), `${p.name}: card ${i} title "${c.title}" lacks the full label`);
      });
      const legend = await page.$$eval('#legend .legend-item', (els) => els.map((e) => ({ text: e.querySelector('.legend-label').textContent, title: e.title })));
      legend.forEach((l, i) => {
        check(l.text === names[i], `${p.name}: legend ${i} reads "${l.text}", expected "${names[i]}"`);
        check(l.title.includes(labels[i]), `${p.name}: legend ${i} title "${l.title}" lacks the full label`);
      });
      await checkPrecisionNote(page, p.name, null); // the note on load, if any
      await checkPrecisionNote(page, p.name, tinyMs, why);
      const T = await clickChart(page, 0.4);
      check(T, `${p.name}: click set no clicked time`);
      await fits('drill-down open');
      const heads = await page.$$eval('#drilldown thead th[title]', (els) => els.map((e) => ({ text: e.textContent, title: e.title })));
      heads.forEach((h, i) => check(h.text === `${names[i]} bytes` && h.title.includes(labels[i]), `${p.name}: table header ${JSON.stringify(h)}`));
      await selectAndWait(page, 'x-mode', 'index', 'xMode');
      await fits('event-index view');
      if (width === 1400) await page.screenshot({ path: path.join(opts.outDir, 'long-labels.png'), fullPage: true });
    } finally {
      await closePage(p);
    }
  }
}

// A trace of one event or a few: x ticks without repeats, whole events in the
// event-index view, also zoomed in; the event-index drill-down where the data
// allows (expectedEvent as in checkEventDrill).
async function testShortTrace(browser, file, nRuns, expectedEvent) {
  const p = await openPage(browser, file, path.basename(file));
  const { page } = p;
  try {
    if ((await pageState(page)).xMode === 'time') {
      await checkPeaks(page, p.name, 'time, absolute');
      const ticks = await checkTicks(page, p.name, 'wall clock');
      console.log(`  ${p.name}: wall-clock ticks ${ticks.filter((t) => t).join(' ')}`);
      await page.evaluate(() => window.memsnapPlot.setScale('x', { min: 0.00001, max: 0.000013 }));
      await checkTicks(page, p.name, 'wall clock, 3 us wide');
      await page.evaluate(() => { const d = window.memsnapPlot.data[0]; window.memsnapPlot.setScale('x', { min: d[0], max: d[d.length - 1] }); });
    }
    await selectAndWait(page, 'x-mode', 'index', 'xMode');
    await checkPeaks(page, p.name, 'index, absolute');
    const ticks = await checkTicks(page, p.name, 'event index');
    console.log(`  ${p.name}: event-index ticks ${ticks.filter((t) => t).join(' ')}`);
    const span = await page.evaluate(() => { const d = window.memsnapPlot.data[0]; return d[d.length - 1] - d[0]; });
    if (span >= 4) {
      await page.evaluate(() => window.memsnapPlot.setScale('x', { min: 1.2, max: 3.7 }));
      await checkTicks(page, p.name, 'event index, zoomed to [1.2, 3.7]');
      await page.evaluate(() => { const d = window.memsnapPlot.data[0]; window.memsnapPlot.setScale('x', { min: d[0], max: d[d.length - 1] }); });
    }
    await checkEventDrill(page, p.name, nRuns, expectedEvent);
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({ path: path.join(opts.outDir, `${path.basename(file, '.html')}.png`) });
  } finally {
    await closePage(p);
  }
}

// The steps box: unticked and disabled where no run has steps; named
// "Steps (inferred)" where a run's steps are iterations inferred from the
// optimizer, else "Profiler steps". Returns whether any run's are inferred.
async function checkStepsBox(p) {
  // Where no run has ProfilerStep markers, the box is unticked and disabled.
  const box = await p.page.$eval('#show-steps', (e) => ({ checked: e.checked, disabled: e.disabled }));
  const anySteps = await p.page.evaluate(() => JSON.parse(document.querySelector('#memsnap-data').textContent)
    .runs.some((r) => Array.isArray(r.steps) && r.steps.length > 0));
  check(anySteps ? box.checked && !box.disabled : !box.checked && box.disabled,
    `${p.name}: the Profiler steps box is ${JSON.stringify(box)} on runs ${anySteps ? 'with' : 'without'} steps`);
  // Iterations inferred from the optimizer are named as such, never as profiler steps.
  const anyInferred = await p.page.evaluate(() => JSON.parse(document.querySelector('#memsnap-data').textContent)
    .runs.some((r) => r.steps.length > 0 && r.steps_source && r.steps_source.inferred));
  const boxLabel = await p.page.$eval('#show-steps-label', (e) => e.textContent);
  check(boxLabel === (anyInferred ? 'Steps (inferred)' : 'Profiler steps'),
    `${p.name}: the steps box reads ${JSON.stringify(boxLabel)} on runs ${anyInferred ? 'with' : 'without'} inferred steps`);
  return anyInferred;
}

// A label is user data that lands in the <title> and in the embedded JSON:
// it must come out as printable() shows it (bidi overrides and control
// characters escaped, the rest verbatim) and must not break the page.
const HOSTILE_LABEL = 'x</script><!--<script>{{APP_JS}}&amp;"\'\u2028\u202eexe.html\x1b[31m\x07';

async function testHostileLabel(browser, file, label = HOSTILE_LABEL) {
  const p = await openPage(browser, file, path.basename(file));
  const expected = MT.printable(label);
  try {
    const labels = await p.page.$$eval('#legend .legend-label', (els) => els.map((e) => e.textContent));
    check(labels.length === 1 && labels[0] === expected,
      `${p.name}: legend label ${JSON.stringify(labels)} != ${JSON.stringify(expected)}`);
    const title = await p.page.title();
    const shown = title.length > 160 ? `${title.slice(0, 160)}...` : title;
    check(title.includes(expected), `${p.name}: <title> ${JSON.stringify(shown)} (${title.length} chars) lacks the label as printable() shows it`);
    const heading = await p.page.textContent('#page-title');
    check(heading === title, `${p.name}: the heading ${JSON.stringify(heading)} is not the <title>`);
    // Issue 56, finding 4: no bidi override or control character reaches
    // what the page shows (the heading read "...exe.html" reversed).
    const text = await p.page.evaluate(() => `${document.title}\n${document.body.innerText}`);
    const raw = text.match(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/);
    check(!raw, raw ? `${p.name}: the page shows U+${raw[0].codePointAt(0).toString(16).padStart(4, '0')} raw`
      : `${p.name}: the page shows no bidi or control character raw`);
    check(await p.page.evaluate(() => !!window.memsnapPlot), `${p.name}: no chart drawn`);
    await checkStepsBox(p);
  } finally {
    await closePage(p);
  }
}

// About 330k lifetimes per run: the page must load quickly, drill down in
// under 200 ms and re-bucket the event-index view on zoom.
async function testLarge(browser, file, files) {
  const p = await openPage(browser, file, path.basename(file));
  const { page } = p;
  try {
    const info = await pageInfo(page);
    const lifetimes = await page.evaluate(() => JSON.parse(document.getElementById('memsnap-data').textContent).runs.map((r) => r.lifetimes.count));
    console.log(`  ${p.name}: ${lifetimes.join(' + ')} lifetimes, decoded in ${info.decodeMs.toFixed(0)} ms, drawn in ${info.renderMs.toFixed(0)} ms`);
    check(info.decodeMs + info.renderMs < 3000, `${p.name}: decode + first draw took ${(info.decodeMs + info.renderMs).toFixed(0)} ms`);
    await checkPeaks(page, p.name, 'time, absolute');
    const T = await clickChart(page, 0.55);
    if (check(T, `${p.name}: click set no clicked time`)) {
      compareDrilldown(`${p.name} at t=${T}`, await drilldownFromPage(page, files.length), expectedFromMemsnap(files, T));
    }
    const t0 = Date.now();
    await checkStacked(page, p.name, files.length, ['time', 'index']);
    console.log(`  ${p.name}: stacked views checked in ${Date.now() - t0} ms`);
    await selectAndWait(page, 'x-mode', 'index', 'xMode');
    await checkPeaks(page, p.name, 'index, absolute');
    const before = await page.evaluate(() => window.memsnapPlot.data[0].length);
    const span = await page.evaluate(() => { const d = window.memsnapPlot.data[0]; return [d[0], d[d.length - 1]]; });
    const lo = span[0] + (span[1] - span[0]) * 0.4;
    const hi = span[0] + (span[1] - span[0]) * 0.42;
    await page.evaluate(([a, b]) => window.memsnapPlot.setScale('x', { min: a, max: b }), [lo, hi]);
    await nextFrame(page);
    const zoomed = await page.evaluate(() => ({
      n: window.memsnapPlot.data[0].length,
      min: window.memsnapPlot.scales.x.min,
      max: window.memsnapPlot.scales.x.max,
      note: document.getElementById('view-note').textContent,
    }));
    check(zoomed.n > before && /zoomed/.test(zoomed.note), `${p.name}: zooming the event-index view did not re-bucket (${before} -> ${zoomed.n} points; note "${zoomed.note}")`);
    check(Math.abs(zoomed.min - lo) < 1e-6 * (span[1] - span[0]) && Math.abs(zoomed.max - hi) < 1e-6 * (span[1] - span[0]),
      `${p.name}: zoom window moved to [${zoomed.min}, ${zoomed.max}] instead of [${lo}, ${hi}]`);
    await checkPeaks(page, p.name, 'index, zoomed');
  } finally {
    await closePage(p);
  }
}

// The offline allocation view (memsnap plot --max-entries): for each run, at
// three zooms, the drawn bands plus the band of the rest make up the embedded
// line at every column, and at the whole trace its highest point is the
// run's peak; each drawn allocation is the trace's (its size and the entry
// that ended it as memsnap events --json and the replay's rules say); the
// hovered allocation shows its user frames as the events' stack has them.
async function checkOfflineAllocations(page, name, files, device = null) {
  const has = await page.evaluate(() => JSON.parse(document.getElementById('memsnap-data').textContent).runs.map((r) => !!r.allocations));
  if (!has.some(Boolean)) return;
  check(await page.isVisible('#allocations-panel'), `${name}: the allocation view is shown offline`);
  for (let r = 0; r < files.length; r++) {
    if (!has[r]) continue;
    const listing = listEvents(files[r], device);
    const ends = eventColumnsFromListing(listing);
    const endOf = new Map(ends.start.map((s, k) => [s, ends.end[k] === LIVE_U32 ? null : ends.end[k]]));
    const rows = new Map(listing.events.map((e) => [e.index, e]));
    if (files.length > 1) await page.selectOption('#allocations-run', String(r));
    await page.dblclick('#chart .u-over');
    for (const [lo, hi] of [[0, 1], [0.25, 0.6], [0.45, 0.47]]) {
      const since = await page.evaluate(() => Number(document.body.dataset.allocations || 0));
      if (lo > 0) {
        await page.evaluate(([a, b]) => {
          const d = window.memsnapPlot.data[0];
          const x0 = d[0];
          const x1 = d[d.length - 1];
          window.memsnapPlot.setScale('x', { min: x0 + a * (x1 - x0), max: x0 + b * (x1 - x0) });
        }, [lo, hi]);
      } else {
        await page.evaluate(() => window.memsnapAllocations.refresh());
      }
      const answered = await page.waitForFunction((n) => Number(document.body.dataset.allocations || 0) > n, since, { timeout: 10000 })
        .then(() => true, () => false);
      if (!check(answered, `${name} run ${r}, zoom ${lo}-${hi}: the allocation view drew (${await page.evaluate(() => document.getElementById('allocations-summary').textContent)})`)) continue;
      const shown = await page.evaluate(() => {
        const v = window.memsnapAllocations;
        return { top: Array.from(v.stacked.top), high: v.data.high, drawn: v.data.allocations.map((a) => [a.entry, Number(a.size), a.end_entry]),
          peak: window.memsnapInfo && JSON.parse(document.getElementById('memsnap-data').textContent).runs[v.run].stats.absolute_peak };
      });
      const step = Math.max(1, Math.floor(shown.top.length / 50));
      let bad = 0;
      for (let c = 0; c < shown.top.length; c += step) if (shown.top[c] !== shown.high[c]) bad += 1;
      check(bad === 0, `${name} run ${r}, zoom ${lo}-${hi}: bands and the band of the rest make up the line (${bad} columns differ, ${shown.drawn.length} drawn)`);
      if (lo === 0) check(Math.max(...shown.high) === Number(shown.peak), `${name} run ${r}: the allocation view's top is the run's peak`);
      const wrong = shown.drawn.filter(([entry, size, end]) => !rows.has(entry) || rows.get(entry).action !== 'alloc'
        || rows.get(entry).size !== size || endOf.get(entry) !== end);
      check(wrong.length === 0, `${name} run ${r}: every drawn allocation is the trace's (size, end): ${JSON.stringify(wrong.slice(0, 3))}`);
    }
    const before = await page.evaluate(() => Number(document.body.dataset.allocations || 0));
    await page.dblclick('#chart .u-over');
    await page.evaluate(() => window.memsnapAllocations.refresh());
    await page.waitForFunction((n) => Number(document.body.dataset.allocations || 0) > n, before, { timeout: 10000 });
    await page.locator('#allocations-canvas').scrollIntoViewIfNeeded();
    const target = await page.evaluate(() => {
      const v = window.memsnapAllocations;
      const L = v.data;
      if (!L.allocations.length) return null;
      // The one drawn largest (bytes times columns), pointed at in its middle.
      let k = 0;
      const area = (i) => Number(L.allocations[i].size) * (v.stacked.bands[i].last - v.stacked.bands[i].first + 1);
      L.allocations.forEach((a, i) => { if (area(i) > area(k)) k = i; });
      const b = v.stacked.bands[k];
      const c = Math.floor((b.first + b.last) / 2);
      const rect = document.getElementById('allocations-canvas').getBoundingClientRect();
      const top = Math.max(1, ...L.high) * 1.05;
      const x = L.colFrom + (c + 0.5) * L.colStep;
      return { entry: L.allocations[k].entry, x: rect.left + ((x - L.window.from) / (L.window.to - L.window.from)) * rect.width,
        y: rect.bottom - ((b.bottoms[c - b.first] + Number(L.allocations[k].size) / 2) / top) * rect.height };
    });
    if (!target) continue;
    await page.mouse.move(target.x, target.y);
    await page.waitForFunction((e) => document.getElementById('allocations-tip').dataset.entry === String(e)
      && document.getElementById('allocations-tip').dataset.frames !== undefined, target.entry, { timeout: 10000 });
    const tipFrames = await page.evaluate(() => [...document.querySelectorAll('#allocations-tip li')].map((li) => li.textContent));
    const row = rows.get(target.entry);
    const frames = row.stack == null ? [] : listing.stacks[row.stack].map((f) => listing.frames[f]);
    const names = frames.map((f) => `${f.name} ${f.filename}:${f.line}`);
    // The tip lists the user's frames (at most 6) or else the first 6: frames of the stack, in its order.
    let at = 0;
    const inOrder = tipFrames.every((t) => { at = names.indexOf(t, at); return at++ >= 0; });
    check(inOrder && tipFrames.length === Math.min(6, names.length) || (inOrder && tipFrames.length > 0 && tipFrames.length <= 6),
      `${name} run ${r}: the hovered allocation (entry ${target.entry}) shows frames of its stack, in order (${tipFrames.length} of ${names.length})`);
    await page.mouse.click(target.x, target.y);
    const pinned = await page.evaluate(() => [...document.querySelectorAll('#allocations-pinned ol li')].map((li) => li.textContent));
    check(JSON.stringify(pinned) === JSON.stringify(names), `${name} run ${r}: a click pins it with its whole stack as memsnap events has it (${pinned.length} frames)`);
  }
}

// Offline, a drill-down row opened lists the largest allocations of its
// source live at the clicked time among those the page embeds: each is an
// alloc of that source live then (its alloc at or before the time, its end
// after it, as memsnap events --json has them), largest first.
async function checkOfflineDrillRow(page, name, files, device = null) {
  const timed = await page.evaluate(() => window.memsnapState.xMode === 'time');
  if (!timed) return;
  const T = Number(await clickChart(page, 0.5));
  const row = page.locator('#drilldown tbody tr[data-source]:not(.unlisted)').first();
  if (!(await row.count())) return;
  const source = await row.getAttribute('data-source');
  await row.click();
  await page.waitForFunction((src) => window.memsnapInfo.drillRow && window.memsnapInfo.drillRow.source === src, source, { timeout: 10000 });
  const listed = await page.evaluate(() => [...document.querySelectorAll('#drill-allocations .drill-run-allocations')]
    .map((d) => ({ run: Number(d.dataset.run), entries: [...d.querySelectorAll('tbody tr')].map((tr) => Number(tr.dataset.entry)) })));
  let wrong = 0;
  let shown = 0;
  for (const l of listed) {
    const listing = listEvents(files[l.run], device);
    const rows = new Map(listing.events.map((e) => [e.index, e]));
    const ends = eventColumnsFromListing(listing);
    const endOf = new Map(ends.start.map((st, k) => [st, ends.end[k] === LIVE_U32 ? null : ends.end[k]]));
    const t0 = listing.events.find((e) => e.time_us != null);
    const seconds = (e) => (e.time_us - t0.time_us) / 1e6;
    let last = Infinity;
    for (const entry of l.entries) {
      shown += 1;
      const e = rows.get(entry);
      const end = endOf.get(entry);
      const live = e && e.action === 'alloc' && e.source === source && seconds(e) <= T + 1e-6
        && (end == null || seconds(rows.get(end)) > T - 1e-6);
      if (!live || e.size > last) wrong += 1;
      last = e ? e.size : last;
    }
  }
  check(listed.length > 0 && wrong === 0, `${name}: a drill-down row (${source}) lists ${shown} of its allocations live at t=${T}, largest first (${wrong} wrong)`);
}

// A real fixture: opens cleanly; optional extra checks.
async function testFixture(browser, fixture, { device, expectOom, expectNoTime, drill, allocatorEveryChange } = {}) {
  const base = path.basename(fixture).replace(/\.[^.]+$/, '');
  const out = path.join(opts.outDir, `fixture-${base}${device != null ? `-device${device}` : ''}.html`);
  const args = ['plot', fixture, '-o', out];
  if (device != null) args.push('--device', String(device));
  try {
    memsnap(args, `plot ${path.basename(fixture)}`);
  } catch (err) {
    check(false, err.message);
    return;
  }
  const p = await openPage(browser, out, path.basename(out));
  const { page } = p;
  try {
    const state = await pageState(page);
    const info = await pageInfo(page);
    if (expectNoTime) {
      check(state.xMode === 'index', `${p.name}: a file without time_us should open in the event-index view (got ${state.xMode})`);
      check(await page.evaluate(() => document.querySelector('#x-mode option[value="time"]').disabled),
        `${p.name}: the wall-clock option should be disabled without time_us`);
      check(await page.evaluate(() => !!window.memsnapPlot), `${p.name}: no chart drawn`);
      // No wall-clock drill-down; the event-index one only with event indices in the data.
      await checkEventDrill(page, p.name, 1, null);
    }
    if (expectOom) check(info.markers.oom > 0, `${p.name}: the OOM entry is not marked on the chart`);
    await checkOfflineAllocations(page, p.name, [fixture], device);
    await checkOfflineDrillRow(page, p.name, [fixture], device);
    if (!expectNoTime) await checkStacked(page, p.name, 1, state.xMode === 'time' ? ['time', 'index'] : ['index']);
    if (drill && state.xMode === 'time') {
      await checkPeaks(page, p.name, 'time, absolute');
      const label = await page.evaluate(() => JSON.parse(document.getElementById('memsnap-data').textContent).runs[0].label);
      for (const fraction of [0.2, 0.5, 0.85]) {
        const T = await clickChart(page, fraction);
        if (check(T, `${p.name}: click at ${fraction} of the width set no clicked time`)) {
          compareDrilldown(`${p.name} at t=${T}`, await drilldownFromPage(page, 1),
            { ...expectedFromMemsnap([fixture], T, device), plotted: await plottedAt(page, T), labels: [label] });
        }
      }
    }
    if (allocatorEveryChange) {
      // About 22k entries: the page holds the allocator after every change,
      // so a click shows the state at its time (as memsnap segments --time).
      const a = await page.evaluate(() => JSON.parse(document.getElementById('memsnap-data').textContent).runs[0].allocator);
      check(a && a.every_change === true, `${p.name}: ${a && a.moments ? a.moments.length : 0} allocator moments, not one per change`);
      const clicked = await clickChart(page, 0.437);
      await page.waitForFunction(() => window.memsnapInfo.allocPanel, null, { timeout: 5000 }).catch(() => {});
      const shown = ((await pageInfo(page)).allocPanel || { runs: [] }).runs[0];
      if (check(clicked != null && shown, `${p.name}: no allocator panel after a click`)) {
        const args = ['segments', '--time', String(clicked), '--top', '100000', fixture];
        if (device != null) args.push('--device', String(device));
        const e = memsnapJson(args, `segments --time ${clicked}`);
        check(shown.exact && e.totals.reserved === shown.reserved && e.totals.allocated === shown.allocated
          && e.totals.free === shown.free && e.totals.largest_free_block === shown.largest_free_block && e.segment_count === shown.segment_count,
        `${p.name}: allocator panel at t=${clicked} ${JSON.stringify(shown)} vs memsnap segments ${JSON.stringify({ ...e.totals, segment_count: e.segment_count })}`);
        console.log(`  ${p.name}: the allocator panel at t=${clicked} is memsnap segments --time ${clicked} (${a.moments.length} moments, one per change)`);
      }
    }
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({ path: out.replace(/\.html$/, '.png') });
  } finally {
    await closePage(p);
  }
}

// ---------------------------------------------------------------- main

// The embedded files must not be able to end their <script>/<style> early or
// be hit by the placeholder substitution.
function checkAssets() {
  section('web assets');
  const assets = readAssets();
  for (const name of PLACEHOLDERS) {
    const n = assets.template.split(`{{${name}}}`).length - 1;
    check(n === 1, `web/template.html has {{${name}}} ${n} times, expected once`);
  }
  const files = { 'web/transforms.js': assets.transformsJs, 'web/app.js': assets.appJs, 'web/app.css': assets.appCss, 'uPlot.iife.min.js': assets.uplotJs, 'uPlot.min.css': assets.uplotCss };
  for (const [file, text] of Object.entries(files)) {
    for (const bad of ['{{', '</script', '</style', '<!--']) {
      check(!text.toLowerCase().includes(bad), `${file} contains "${bad}"`);
    }
  }
  check(!/\b(https?:)?\/\/[a-z0-9.-]+\.[a-z]{2,}\//i.test(assets.template + assets.transformsJs + assets.appJs + assets.appCss),
    'web/ files reference an external URL');
  console.log('  template placeholders and embedded files are safe');
}

// Set by main when the fixtures are selected but their folder is absent.
let fixturesSkipped = false;

async function main() {
  fs.mkdirSync(opts.outDir, { recursive: true });
  const generated = opts.only.includes('generated');
  if (opts.sample || generated) checkAssets(); // once, in the part that always runs
  fixturesSkipped = !opts.sample && opts.only.includes('fixtures') && !fs.existsSync(opts.fixtures);
  if (fixturesSkipped) console.log(`\nSKIP fixtures: ${opts.fixtures} is absent`);
  if (!opts.sample && !generated && fixturesSkipped) return; // no page to open
  if (!fs.existsSync(opts.chromium)) fatal(`no Chromium at ${opts.chromium} (Debian: apt-get install chromium)`);
  if (!opts.sample) {
    if (!fs.existsSync(opts.memsnap)) fatal(`no memsnap binary at ${opts.memsnap} (build it first)`);
    if (!hasPlotCommand()) fatal(`${opts.memsnap} has no 'plot' subcommand yet (or 'plot --help' failed); use --sample to test the page alone`);
  }
  const browser = await chromium.launch({ executablePath: opts.chromium, args: CHROMIUM_ARGS, timeout: 60000 });
  try {
    if (opts.sample) {
      await sampleScenarios(browser);
    } else {
      if (generated) await generatedScenarios(browser);
      if (opts.only.includes('fixtures') && !fixturesSkipped) await fixtureScenarios(browser);
    }
  } finally {
    await browser.close();
  }
}

async function sampleScenarios(browser) {
  section('synthetic pages (make_sample.mjs)');
  const assets = readAssets();
  const a = makeRun({ label: 'A', seed: 7, allocs: 15000, durationS: 1.5, steps: 4 });
  const b = makeRun({ label: 'B', seed: 8, allocs: 20000, durationS: 2.0, steps: 4, growth: 1.3, oom: true });
  const overlay = path.join(opts.outDir, 'overlay.html');
  fs.writeFileSync(overlay, assemblePage(assets, 'memsnap: A vs B', makeData([a.run, b.run])));
  await testOverlay(browser, overlay, 2, (T) => expectedLive([a.truth, b.truth], Number(T)), 'overlay.png',
    (E) => ({ joint: expectedLiveAtEvent([a.truth, b.truth], E) }));
  // The single page's data has no event indices (as memsnap 0.1.0 writes it).
  const single = path.join(opts.outDir, 'single.html');
  const a0 = makeRun({ label: 'A', seed: 7, allocs: 15000, durationS: 1.5, steps: 4, eventIndex: false });
  fs.writeFileSync(single, assemblePage(assets, 'memsnap: A', makeData([a0.run])));
  await testOverlay(browser, single, 1, (T) => expectedLive([a0.truth], Number(T)), 'single.png');

  section('long labels');
  // File names that differ in the middle; fractional base buckets (the C++
  // side writes duration / 65536 for long traces): the default 1 ms is rounded,
  // 0.001 ms is both finer than the buckets and over the point limit.
  const long = path.join(opts.outDir, 'long-labels.html');
  const L = (n) => `team-llm_assignment2-systems__medium_${n}_training_memory_snapshot.pickle`;
  const la = makeRun({ label: L(128), file: `/data/snapshots/${L(128)}`, seed: 11, allocs: 3000, durationS: 0.3, bucketUs: 300000 / 65536, steps: 3 });
  const lb = makeRun({ label: L(512), file: `/data/snapshots/${L(512)}`, seed: 12, allocs: 4000, durationS: 0.3, bucketUs: 300000 / 65536, steps: 3, growth: 1.5 });
  fs.writeFileSync(long, assemblePage(assets, `memsnap: ${L(128)} vs ${L(512)}`, makeData([la.run, lb.run])));
  await testLongLabels(browser, long, 0.001, /at most 50,000 points per run/);

  section('one event');
  const one = path.join(opts.outDir, 'one-event.html');
  const o = makeRun({ label: 'one', seed: 13, allocs: 1, steps: 1 });
  fs.writeFileSync(one, assemblePage(assets, 'memsnap: one event', makeData([o.run])));
  await testShortTrace(browser, one, 1, (E) => ({ joint: expectedLiveAtEvent([o.truth], E) }));

  section('hostile label');
  const hostile = path.join(opts.outDir, 'hostile.html');
  const h = makeRun({ label: HOSTILE_LABEL, seed: 9, allocs: 2000, steps: 0 });
  fs.writeFileSync(hostile, assemblePage(assets, `memsnap: ${MT.printable(HOSTILE_LABEL)}`, makeData([h.run])));
  await testHostileLabel(browser, hostile);
}

async function generatedScenarios(browser) {
  section('generated snapshots');
  const gen = path.join(ROOT, 'tests', 'gen', 'make_snapshot.py');
  if (!fs.existsSync(gen)) fatal(`no generator at ${gen}`);
  const A = path.join(opts.outDir, 'gen_a.pickle');
  const B = path.join(opts.outDir, 'gen_b.pickle');
  run(opts.python, [gen, '--out', A, '--events', '12000', '--steps', '5', '--marks', '--seed', '101'], 'generate A');
  run(opts.python, [gen, '--out', B, '--events', '18000', '--steps', '5', '--marks', '--seed', '202', '--oom'], 'generate B');
  const overlay = path.join(opts.outDir, 'overlay.html');
  memsnap(['plot', A, B, '--labels', 'A', 'B', '-o', overlay], 'plot A B');
  check(fs.existsSync(overlay), `memsnap plot wrote no ${overlay}`);
  const listings = [listEvents(A), listEvents(B)];
  const nativeEvents = extractPage(fs.readFileSync(overlay, 'utf8')).data.runs.every((r) => typeof r.lifetimes.start_event === 'string');
  const perRun = (E) => ({ perRun: [A, B].map((f, r) => expectedRunAtEvent(f, listings[r], E)) });
  await testOverlay(browser, overlay, 2, (T) => expectedFromMemsnap([A, B], T), 'overlay.png', nativeEvents ? perRun : null);
  await testOomPanel(browser, overlay, [A, B]);
  await testAllocatorPanel(browser, overlay, [A, B]);
  {
    const p = await openPage(browser, overlay, 'overlay.html');
    try {
      await checkOfflineAllocations(p.page, 'overlay.html', [A, B]);
      await checkOfflineDrillRow(p.page, 'overlay.html', [A, B]);
      await p.page.locator('#allocations-panel').screenshot({ path: path.join(opts.outDir, 'allocations-offline.png') });
    } finally {
      await closePage(p);
    }
  }

  section('memory from before the trace (late start, ring buffer): the drill-down adds up to the line');
  // Runs whose line starts above zero: the drill-down lists the trace's
  // allocations (as replay-to-time does) and, below them, the memory from
  // before the trace that is still live, by source, so that every click adds
  // up to the line (checkAddsUp, in the wall-clock and event-index views, and
  // with moments instead of lifetimes).
  const late = path.join(opts.outDir, 'gen_late.pickle');
  const ring = path.join(opts.outDir, 'gen_ring.pickle');
  run(opts.python, [gen, '--out', late, '--events', '3000', '--late-start', '--steps', '3', '--marks', '--seed', '13'], 'generate late start');
  run(opts.python, [gen, '--out', ring, '--events', '4000', '--ring-buffer', '1500', '--steps', '4', '--marks', '--seed', '21'], 'generate ring buffer');
  const beforeTrace = path.join(opts.outDir, 'before-trace.html');
  memsnap(['plot', late, ring, '--labels', 'late', 'ring', '-o', beforeTrace], 'plot late ring');
  const beforeData = extractPage(fs.readFileSync(beforeTrace, 'utf8')).data.runs;
  check(beforeData.every((r) => r.stats.baseline > 0 && r.unlisted && r.unlisted.rows.length > 0),
    `before-trace.html: the runs should start above zero with rows for memory from before the trace (${JSON.stringify(beforeData.map((r) => [r.stats.baseline, r.unlisted && r.unlisted.rows]))})`);
  check(!!beforeData[1].unlisted && beforeData[1].unlisted.count > 0, 'before-trace.html: the ring buffer run frees memory from before the trace, its data holds no such change');
  const beforeListings = [listEvents(late), listEvents(ring)];
  await testOverlay(browser, beforeTrace, 2, (T) => expectedFromMemsnap([late, ring], T), 'before-trace.png',
    (E) => ({ perRun: [late, ring].map((f, r) => expectedRunAtEvent(f, beforeListings[r], E)) }));
  const ringMoments = path.join(opts.outDir, 'before-trace-moments.html');
  memsnap(['plot', ring, '--max-lifetimes', '100', '-o', ringMoments], 'plot ring --max-lifetimes 100');
  await testOverlay(browser, ringMoments, 1, (T) => expectedFromMemsnap([ring], T), null);

  section('many runs (64 ranks of a 4-stage pipeline, one outlier)');
  const ranksDir = path.join(opts.outDir, 'ranks');
  run(opts.python, [path.join(ROOT, 'tests', 'gen', 'make_ranks.py'), '--out', ranksDir, '--ranks', '64', '--stages', '4',
    '--outlier', '37', '--events', '400'], 'generate 64 ranks');
  const many = path.join(opts.outDir, 'many-runs.html');
  memsnap(['plot', ranksDir, '-o', many], 'plot a folder of 64 ranks');
  await testManyRuns(browser, many);

  section('event-index drill-down (event indices rebuilt from memsnap events where the data has none)');
  const withEvents = path.join(opts.outDir, 'overlay-events.html');
  const native = withEventColumns(overlay, withEvents, listings);
  console.log(`  ${native ? 'memsnap writes start_event/end_event; they match memsnap events' : 'memsnap writes no start_event/end_event yet: rebuilt from memsnap events'}`);
  {
    const p = await openPage(browser, withEvents, path.basename(withEvents));
    try {
      await checkEventDrill(p.page, p.name, 2, perRun);
    } finally {
      await closePage(p);
    }
  }

  section('long labels (file names)');
  const longA = path.join(opts.outDir, 'team-llm_assignment2-systems__medium_128_training_memory_snapshot.pickle');
  const longB = path.join(opts.outDir, 'team-llm_assignment2-systems__medium_512_training_memory_snapshot.pickle');
  fs.copyFileSync(A, longA);
  fs.copyFileSync(B, longB);
  const long = path.join(opts.outDir, 'long-labels.html');
  memsnap(['plot', longA, longB, '-o', long], 'plot with default labels');
  await testLongLabels(browser, long, 0.0001, /finest buckets this file records/);

  section('short trace (the generator\'s shortest: 5 events)');
  const S = path.join(opts.outDir, 'gen_short.pickle');
  run(opts.python, [gen, '--out', S, '--events', '1', '--seed', '5'], 'generate short');
  const short = path.join(opts.outDir, 'short.html');
  memsnap(['plot', S, '-o', short], 'plot short');
  await testShortTrace(browser, short, 1, null);
  const shortEvents = path.join(opts.outDir, 'short-events.html');
  const shortListing = listEvents(S);
  withEventColumns(short, shortEvents, [shortListing]);
  await testShortTrace(browser, shortEvents, 1, (E) => ({ perRun: [expectedRunAtEvent(S, shortListing, E)] }));

  section('single file');
  const single = path.join(opts.outDir, 'single.html');
  memsnap(['plot', A, '-o', single], 'plot A');
  await testOverlay(browser, single, 1, (T) => expectedFromMemsnap([A], T), 'single.png');
  await testAllocatorPanel(browser, single, [A], true);

  section('the allocator model\'s reserved line (plot --whatif)');
  const whatifPage = path.join(opts.outDir, 'whatif.html');
  memsnap(['plot', A, '--whatif', 'expandable_segments:True', '-o', whatifPage], 'plot A --whatif expandable_segments:True');
  await testWhatIfLine(browser, whatifPage, memsnapJson(['whatif', A, '--set', 'expandable_segments:True'], 'whatif A --set'));

  section('moments instead of lifetimes (plot --max-lifetimes)');
  // The page keeps live-by-source at moments, not every allocation: a click
  // snaps to the nearest moment, the page states its time, and replay-to-time
  // at that time gives the same rows (testOverlay reads the stated time).
  const momentsPage = path.join(opts.outDir, 'moments.html');
  memsnap(['plot', A, '--max-lifetimes', '100', '-o', momentsPage], 'plot A --max-lifetimes 100');
  const momentsData = extractPage(fs.readFileSync(momentsPage, 'utf8')).data.runs[0];
  check(momentsData.moments && momentsData.moments.count > 1 && momentsData.lifetimes.count === 0,
    'plot --max-lifetimes 100: the page does not carry moments instead of lifetimes');
  await testOverlay(browser, momentsPage, 1, (T) => expectedFromMemsnap([A], T), 'moments.png');
  {
    const p = await openPage(browser, momentsPage, 'moments.html');
    try {
      await clickChart(p.page, 0.37);
      const hint = await p.page.textContent('#drill-hint');
      check(/snapped to t = .* the nearest of [\d,]+ moments/.test(hint), `moments.html: the drill-down does not say it snapped: "${hint}"`);
    } finally {
      await closePage(p);
    }
  }

  section('hostile label');
  const hostile = path.join(opts.outDir, 'hostile.html');
  try {
    memsnap(['plot', A, '--labels', HOSTILE_LABEL, '-o', hostile], 'plot with a hostile label');
    await testHostileLabel(browser, hostile);
    // The default label is the file's name: one named with U+202E, ESC and BEL.
    const named = path.join(opts.outDir, 'lmth.\u202eexe\x1b[31m\x07.pickle');
    fs.copyFileSync(A, named);
    const namedPage = path.join(opts.outDir, 'hostile-name.html');
    memsnap(['plot', named, '-o', namedPage], 'plot a file with a hostile name');
    await testHostileLabel(browser, namedPage, path.basename(named));
  } catch (err) {
    check(false, err.message);
  }

  section('inferred steps (a Megatron-Bridge-shaped run: Optimizer.step marks, no ProfilerStep)');
  try {
    const bridge = path.join(opts.outDir, 'gen_bridge.pickle');
    run(opts.python, [gen, '--out', bridge, '--events', '3000', '--steps', '4', '--bridge', '--seed', '77'], 'generate bridge');
    const bridgePage = path.join(opts.outDir, 'bridge.html');
    memsnap(['plot', bridge, '-o', bridgePage], 'plot bridge');
    const p = await openPage(browser, bridgePage, 'bridge.html');
    try {
      check(await checkStepsBox(p), 'bridge.html: the run carries no inferred steps');
    } finally {
      await closePage(p);
    }
  } catch (err) {
    check(false, err.message);
  }

  section('large (about 330k allocations per run)');
  const LA = path.join(opts.outDir, 'gen_large_a.pickle');
  const LB = path.join(opts.outDir, 'gen_large_b.pickle');
  await Promise.all([
    runAsync(opts.python, [gen, '--out', LA, '--events', '1000000', '--steps', '10', '--marks', '--seed', '303'], 'generate large A'),
    runAsync(opts.python, [gen, '--out', LB, '--events', '1000000', '--steps', '10', '--marks', '--seed', '404'], 'generate large B'),
  ]);
  const large = path.join(opts.outDir, 'large.html');
  memsnap(['plot', LA, LB, '-o', large], 'plot large A B');
  await testLarge(browser, large, [LA, LB]);
}

// Assumes the fixtures folder exists (main skips the part otherwise).
async function fixtureScenarios(browser) {
  section('real fixtures');
  const dir = opts.fixtures;
  const cases = [
    ['Constructor-Sun_code_location__memory_snapshot.pickle', { device: 1, expectOom: true, drill: true }],
    ['Constructor-Sun_code_location__memory_snapshot.pickle', { drill: true }], // device 0: expandable segments
    ['cranberrii_ftcourse__memory_snapshot.pickle', { expectNoTime: true }],
    ['albi2_thesis-text-to-SQL__dump_snapshot@677c1c0.pickle', {}], // expandable, segments only (no trace)
    ['Wedsonlin_assignment2-systems__medium_512_training_memory_snapshot.pickle', { drill: true, allocatorEveryChange: true }],
  ];
  for (const [file, options] of cases) {
    const full = path.join(dir, file);
    // The folder is there: a missing file means a broken fixture set, not a skip.
    if (!check(fs.existsSync(full), `${file} is not in ${dir}`)) continue;
    await testFixture(browser, full, options);
  }
}

main().then(() => {
  const secs = ((Date.now() - started) / 1000).toFixed(1);
  const skipNote = fixturesSkipped ? `; fixtures skipped (${opts.fixtures} is absent)` : '';
  if (failures.length) {
    console.log(`\ntest_plot: FAILED ${failures.length} of ${checks} checks (${secs} s)${skipNote}:`);
    for (const f of failures) console.log(`  - ${f}`);
    process.exit(1);
  }
  console.log(`\ntest_plot: all ${checks} checks passed (${secs} s)${skipNote}; screenshots in ${opts.outDir}`);
  if (fixturesSkipped) process.exit(SKIPPED);
}, (err) => {
  console.error(`test_plot: ${err && err.stack ? err.stack : err}`);
  process.exit(1);
});

