#!/usr/bin/env node
// The page as `memsnap serve` serves it, in headless Chromium: it loads with
// no console error and asks nothing of any origin but the server; its search
// box finds what GET /api/search finds (count, rows); a row's click shows the
// allocation's stack as GET /api/allocation gives it, the user's frames in
// the open and the library's folded. The allocation and segment views draw
// the server's layouts for the chart's window (checkAllocations,
// checkSegments), the allocator panel equals memsnap segments --time, a
// drill-down row lists its source's allocations, the ranks table opens a
// rank. The view lives in the address's fragment: a link opens it, a change
// of view rewrites it, a reload keeps it. The same page opened as a file
// keeps the served panels hidden (test_plot.mjs checks it makes no request
// at all). With --fixtures DIR: every real fixture with a trace, served
// together (fixturePass).
//
//   node tests/browser/test_serve.mjs --memsnap build/memsnap [--chromium /usr/bin/chromium]
//        [--out-dir build/browser] [--fixtures DIR]
//
// Exits 0 when every check passes, 1 otherwise, 77 (skipped) where the build
// has no server or there is no Chromium.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';

const SKIPPED = 77;
const REPO = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..');
const FILES = ['training_steps.pickle.gz', 'training_steps_larger_batch.pickle.gz']
  .map((name) => path.join(REPO, 'examples', name));

function option(name, fallback) {
  const at = process.argv.indexOf(name);
  return at >= 0 && process.argv[at + 1] ? process.argv[at + 1] : fallback;
}
const MEMSNAP = option('--memsnap', null);
const CHROMIUM = option('--chromium', '/usr/bin/chromium');
const OUT = option('--out-dir', path.join(REPO, 'build', 'browser'));

const failures = [];
function check(ok, what) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures.push(what);
}

const FIXTURES = option('--fixtures', null);

// Starts `memsnap serve FILES` and resolves with its URL (the first stdout line).
function startServer(files = FILES) {
  const server = spawn(MEMSNAP, ['serve', ...files], { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  server.stderr.on('data', (chunk) => { err += chunk; });
  return new Promise((resolve, reject) => {
    let out = '';
    server.stdout.on('data', (chunk) => {
      out += chunk;
      if (out.includes('\n')) resolve({ server, url: out.split('\n')[0].trim() });
    });
    server.on('exit', (status) => reject(Object.assign(new Error(err.trim()), { status })));
  });
}

// startServer, or null (say skipped) where this memsnap has no server.
async function startOrSkip(files = FILES) {
  try {
    return await startServer(files);
  } catch (err) {
    if (/built without the server/.test(err.message)) {
      console.log('skipped: this memsnap has no server');
      return null;
    }
    throw err;
  }
}

async function api(url, route, params) {
  const base = new URL(url);
  const query = new URLSearchParams({ ...params, token: base.searchParams.get('token') });
  const response = await fetch(`${base.origin}${route}?${query}`);
  return response.json();
}

async function search(page, run, text) {
  await page.selectOption('#search-run', String(run));
  await page.fill('#search-text', text);
  await page.evaluate(() => { document.getElementById('search-summary').textContent = ''; });
  await page.click('#search-form button[type=submit]');
  await page.waitForFunction(() => document.getElementById('search-summary').textContent !== '',
    null, { timeout: 10000 });
}

async function checkSearchAndStack(page, url) {
  for (const [run, text] of [[0, 'attention'], [1, 'train.py'], [0, 'no-frame-has-this']]) {
    await search(page, run, text);
    const expected = await api(url, '/api/search', { file: run, q: text });
    const shown = await page.evaluate(() => ({
      count: document.getElementById('search-summary').dataset.count,
      entries: [...document.querySelectorAll('#search-results tbody tr')].map((r) => Number(r.dataset.entry)),
    }));
    check(shown.count === String(expected.count), `search '${text}' in run ${run}: ${shown.count} found, the server says ${expected.count}`);
    check(JSON.stringify(shown.entries) === JSON.stringify(expected.rows.map((r) => r.entry)),
      `search '${text}' in run ${run}: the rows are the server's ${expected.rows.length}`);
  }
  await search(page, 0, 'attention');
  const first = await page.$('#search-results tbody tr');
  const entry = Number(await first.getAttribute('data-entry'));
  await first.click();
  await page.waitForFunction((e) => document.getElementById('allocation-detail').dataset.entry === String(e),
    entry, { timeout: 10000 });
  const expected = await api(url, '/api/allocation', { file: 0, entry });
  const shown = await page.evaluate(() => {
    const box = document.getElementById('allocation-detail');
    const allocated = box.querySelector('ol');
    return {
      source: box.querySelector('h3').textContent,
      frames: [...allocated.querySelectorAll('li')].map((li) => li.textContent),
      users: [...allocated.querySelectorAll(':scope > li')].map((li) => li.textContent),
    };
  });
  const frames = expected.frames.map((f) => `${f.name} ${f.filename}:${f.line}`);
  check(shown.source === expected.source, `the clicked allocation's source: ${shown.source}`);
  check(JSON.stringify(shown.frames) === JSON.stringify(frames), `its stack, every frame in order (${frames.length})`);
  check(JSON.stringify(shown.users) === JSON.stringify(expected.frames.filter((f) => f.users)
    .map((f) => `${f.name} ${f.filename}:${f.line}`)), 'the user\'s frames in the open, the library\'s folded');
}

// Waits for the allocation view's answer to a request made after `since`.
async function allocationsAfter(page, since) {
  await page.waitForFunction((n) => Number(document.body.dataset.allocations || 0) > n, since, { timeout: 15000 });
  return page.evaluate(() => Number(document.body.dataset.allocations));
}

// The allocation view: what it draws is the server's layout for the chart's
// window; the bands plus the band of the rest make up the memory line (GET
// /api/line) at 50 columns at three zooms; a hovered allocation names itself
// and its user frames; a click pins it with its whole stack; a search marks
// what it finds; a zoom asks again.
async function checkAllocations(page, url) {
  check(await page.isVisible('#allocations-panel'), 'the served page shows the allocation view');
  let seen = await allocationsAfter(page, 0);
  const duration = await page.evaluate(() => window.memsnapInfo.allocations.to);
  for (const [lo, hi] of [[0, 1], [0.3, 0.5], [0.42, 0.43]]) {
    if (lo > 0 || hi < 1) {
      await page.evaluate(([a, b]) => window.memsnapPlot.setScale('x', { min: a, max: b }), [duration * lo, duration * hi]);
      seen = await allocationsAfter(page, seen);
    }
    const shown = await page.evaluate(() => {
      const v = window.memsnapAllocations;
      return { info: window.memsnapInfo.allocations, top: Array.from(v.stacked.top), high: v.data.high, drawn: v.data.allocations.length };
    });
    const { info } = shown;
    const line = await api(url, '/api/line', { file: 0, axis: info.axis, from: info.from, to: info.to, width: info.width });
    const step = Math.max(1, Math.floor(info.width / 50));
    let equal = 0;
    let compared = 0;
    for (let c = 0; c < info.width; c += step) {
      compared += 1;
      if (shown.top[c] === line.high[c]) equal += 1;
    }
    check(compared >= Math.min(50, info.width) && equal === compared,
      `zoom ${lo}-${hi}: the drawn allocations and the band make up the line at ${equal} of ${compared} columns (${shown.drawn} drawn)`);
  }
  // Hover the largest drawn allocation in its middle column.
  await page.locator('#allocations-canvas').scrollIntoViewIfNeeded();
  const target = await page.evaluate(() => {
    const v = window.memsnapAllocations;
    const L = v.data;
    let k = 0;
    L.allocations.forEach((a, i) => { if (Number(a.size) > Number(L.allocations[k].size)) k = i; });
    const a = L.allocations[k];
    const b = v.stacked.bands[k];
    const c = Math.floor((b.first + b.last) / 2);
    const canvas = document.getElementById('allocations-canvas');
    const rect = canvas.getBoundingClientRect();
    const top = Math.max(1, ...L.high) * 1.05;
    const bytes = b.bottoms[c - b.first] + Number(a.size) / 2;
    return { entry: a.entry, x: rect.left + ((c + 0.5) / L.band.length) * rect.width, y: rect.bottom - (bytes / top) * rect.height };
  });
  await page.mouse.move(target.x, target.y);
  await page.waitForFunction((e) => {
    const tip = document.getElementById('allocations-tip');
    return !tip.hidden && tip.dataset.entry === String(e) && tip.dataset.frames !== undefined;
  }, target.entry, { timeout: 10000 });
  const expected = await api(url, '/api/allocation', { file: 0, entry: target.entry });
  const tipFrames = await page.evaluate(() => [...document.querySelectorAll('#allocations-tip li')].map((li) => li.textContent));
  const users = expected.frames.filter((f) => f.users);
  const wanted = (users.length ? users : expected.frames).slice(0, 6).map((f) => `${f.name} ${f.filename}:${f.line}`);
  check(JSON.stringify(tipFrames) === JSON.stringify(wanted), `hovering entry ${target.entry} shows its frames (${wanted.length})`);
  await page.mouse.click(target.x, target.y);
  await page.waitForFunction((e) => document.getElementById('allocations-pinned').dataset.entry === String(e),
    target.entry, { timeout: 10000 });
  const pinned = await page.evaluate(() => [...document.querySelectorAll('#allocations-pinned ol')][0].querySelectorAll('li').length);
  check(pinned === expected.frames.length, `a click pins it with its whole stack (${pinned} of ${expected.frames.length} frames)`);
  // A search marks its matches in the view (the whole trace again).
  await page.dblclick('#chart .u-over');
  seen = await allocationsAfter(page, seen);
  await search(page, 0, 'attention');
  seen = await allocationsAfter(page, seen);
  const marked = await page.evaluate(() => ({ matched: window.memsnapInfo.allocations.matched,
    flagged: window.memsnapAllocations.data.allocations.filter((a) => a.matches).length, query: window.memsnapInfo.allocations.query }));
  check(marked.query === 'attention' && marked.matched === marked.flagged && marked.matched > 0,
    `a search marks the drawn allocations it finds: ${JSON.stringify(marked)}`);
}

// The segment timeline: the server's answer for the chart's window, its
// bands plus the band of the rest make up reserved memory at every column,
// and a hovered segment names itself.
async function checkSegments(page, url) {
  check(await page.isVisible('#segments-panel'), 'the served page shows the segment timeline');
  await page.waitForFunction(() => window.memsnapSegments.data, null, { timeout: 15000 });
  const shown = await page.evaluate(() => {
    const v = window.memsnapSegments;
    const { colFrom, colStep, window: shownWindow, ...answer } = v.data; // the page's own additions
    return { info: window.memsnapInfo.segments, top: Array.from(v.stacked.top), data: answer };
  });
  const { info } = shown;
  const expected = await api(url, '/api/segment-timeline', { file: 0, axis: info.axis, from: info.from, to: info.to, width: info.width, budget: 500 });
  check(JSON.stringify(expected) === JSON.stringify(shown.data), `the segment timeline draws the server's answer (${info.drawn} segments)`);
  check(shown.top.every((v, c) => v === expected.reserved[c]), 'its bands and the band of the rest make up reserved memory at every column');
  await page.locator('#segments-canvas').scrollIntoViewIfNeeded();
  const target = await page.evaluate(() => {
    const v = window.memsnapSegments;
    let k = 0;
    v.data.segments.forEach((g, i) => {
      const span = (x) => v.stacked.bands[x].last - v.stacked.bands[x].first;
      if (Number(g.size) * span(i) > Number(v.data.segments[k].size) * span(k)) k = i;
    });
    const b = v.stacked.bands[k];
    const g = v.data.segments[k];
    const c = Math.floor((b.first + b.last) / 2);
    const rect = document.getElementById('segments-canvas').getBoundingClientRect();
    const top = Math.max(1, ...v.data.reserved) * 1.05;
    const bytes = b.bottoms[c - b.first] + Number(g.size) / 2;
    return { address: g.address, x: rect.left + ((c + 0.5) / v.data.band.length) * rect.width, y: rect.bottom - (bytes / top) * rect.height };
  });
  await page.mouse.move(target.x, target.y);
  await page.waitForFunction((a) => document.getElementById('segments-tip').dataset.entry === String(a), target.address, { timeout: 10000 });
  check(true, `hovering a segment names it (0x${target.address.toString(16)})`);
}

// The allocator panel, served: a click on the chart shows each run's
// segments then as `memsnap segments --time T --json` gives them (totals,
// count, the bars in order); a hovered allocated block names the allocation
// GET /api/block gives; the slider moves the moment.
async function checkServedAllocator(page, url) {
  check(await page.isVisible('#alloc-slider'), 'the served allocator panel has a slider');
  await page.locator('#chart .u-over').scrollIntoViewIfNeeded();
  const before = await page.evaluate(() => Number(document.body.dataset.allocAsked || 0));
  const box = await page.locator('#chart .u-over').boundingBox();
  await page.mouse.click(box.x + box.width * 0.55, box.y + box.height * 0.5);
  await page.waitForFunction((n) => Number(document.body.dataset.allocAsked || 0) > n, before, { timeout: 15000 });
  const panel = await page.evaluate(() => ({
    runs: window.memsnapInfo.allocPanel.runs,
    bars: [...document.querySelectorAll('#alloc-body .alloc-run')].map((r) => [...r.querySelectorAll('.alloc-row')].map((row) => row.dataset.address)),
  }));
  for (const [i, run] of panel.runs.entries()) {
    const cli = JSON.parse(execFileSync(MEMSNAP, ['segments', FILES[i], '--time', String(run.t_s), '--json', '--top', '48']));
    const same = cli.totals.reserved === run.reserved && cli.totals.allocated === run.allocated
      && cli.totals.free === run.free && cli.segment_count === run.segment_count && cli.position === run.position;
    check(same, `run ${i}: the allocator at t=${run.t_s} is memsnap segments --time (${run.segment_count} segments, ${run.reserved} reserved)`);
    check(JSON.stringify(panel.bars[i]) === JSON.stringify(cli.segments.map((g) => `0x${g.address.toString(16)}`)),
      `run ${i}: its ${panel.bars[i].length} bars are the report's segments in order`);
  }
  const block = page.locator('#alloc-body .alloc-run[data-run="0"] .blk.s0').first();
  await block.scrollIntoViewIfNeeded();
  await block.hover();
  await page.waitForFunction(() => { const t = document.getElementById('alloc-tip'); return !t.hidden && t.dataset.entry !== undefined; },
    null, { timeout: 10000 });
  const hovered = await page.evaluate(() => {
    const span = document.querySelector('#alloc-body .alloc-run[data-run="0"] .blk.s0');
    const row = span.closest('.alloc-row');
    return { address: parseInt(row.dataset.address, 16) + Number(span.dataset.offset), entry: document.getElementById('alloc-tip').dataset.entry,
      position: Number(span.closest('.alloc-run').dataset.position) };
  });
  const expected = (await api(url, '/api/block', { file: 0, address: hovered.address, position: hovered.position })).allocation;
  check(hovered.entry === (expected ? String(expected.entry) : ''), `a hovered block names its allocation: entry ${hovered.entry}`);
  // A drill-down row opened: its source's allocations live then, per run, as GET /api/live lists them.
  const row = page.locator('#drilldown tbody tr[data-source]:not(.unlisted)').first();
  const source = await row.getAttribute('data-source');
  const clickedTime = Number(await page.evaluate(() => document.body.dataset.clickedTime));
  await row.click();
  await page.waitForFunction((src) => window.memsnapInfo.drillRow && window.memsnapInfo.drillRow.source === src, source, { timeout: 15000 });
  const listed = await page.evaluate(() => [...document.querySelectorAll('#drill-allocations .drill-run-allocations')]
    .map((d) => ({ run: Number(d.dataset.run), count: Number(d.dataset.count), entries: [...d.querySelectorAll('tbody tr')].map((tr) => Number(tr.dataset.entry)) })));
  let same = listed.length > 0;
  for (const l of listed) {
    const expected = await api(url, '/api/live', { file: l.run, time: clickedTime, source });
    same = same && expected.count === l.count && JSON.stringify(expected.rows.map((r) => r.entry)) === JSON.stringify(l.entries);
  }
  check(same, `a drill-down row (${source}) lists its allocations live then, as GET /api/live does (${listed.map((l) => l.count).join(', ')})`);
  await page.locator('#drill-allocations tbody tr').first().click();
  await page.waitForFunction(() => document.getElementById('drill-allocation-detail').dataset.entry !== undefined
    && !document.getElementById('drill-allocation-detail').hidden, null, { timeout: 10000 });
  check(true, 'one of them opens its stack');
  const asked = await page.evaluate(() => Number(document.body.dataset.allocAsked));
  await page.locator('#alloc-slider').fill('250');
  await page.waitForFunction((n) => Number(document.body.dataset.allocAsked) > n, asked, { timeout: 15000 });
  check(true, 'the slider moves the moment');
}

// The ranks table: the rows of GET /api/ranks with its outliers marked; a
// row opens that rank in the stacked, allocation and search views.
async function checkRanks(page, url) {
  await page.waitForFunction(() => window.memsnapInfo.ranks, null, { timeout: 15000 });
  const expected = await api(url, '/api/ranks', {});
  const shown = await page.evaluate(() => [...document.querySelectorAll('#ranks-table tbody tr')]
    .map((r) => ({ outlier: r.classList.contains('outlier'), peak: r.children[2].textContent })));
  check(shown.length === expected.ranks.length
    && shown.every((r, i) => r.outlier === expected.ranks[i].outlier),
  `the ranks table has the ${expected.ranks.length} rows of memsnap ranks, outliers marked (${shown.filter((r) => r.outlier).length})`);
  const second = page.locator('#ranks-table tbody tr').nth(1);
  const run = Number(await second.getAttribute('data-run'));
  await second.click();
  const opened = await page.evaluate(() => ({ rank: window.memsnapInfo.openedRank, stackRun: window.memsnapState.stackRun,
    allocations: window.memsnapAllocations.run, search: document.getElementById('search-run').value }));
  check(opened.rank === run && opened.stackRun === run && opened.allocations === run && opened.search === String(run),
    `a row opens its rank in every view: ${JSON.stringify(opened)}`);
}

// Issue 56, finding 4: a served folder whose files are named with U+202E,
// ESC and BEL. The page shows their names (heading, legend, cards, the ranks
// table of GET /api/ranks) escaped as the text reports show them, and each
// ranks row still opens its file.
const SPOOFING = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/;
async function hostileNamesPass(browser) {
  const folder = path.join(OUT, 'serve-hostile-names');
  fs.rmSync(folder, { recursive: true, force: true });
  fs.mkdirSync(folder, { recursive: true });
  const names = ['rank_0\u202elmth.exe.pickle.gz', 'rank_1\x1b[31m\x07.pickle.gz'];
  FILES.forEach((file, i) => fs.copyFileSync(file, path.join(folder, names[i])));
  const started = await startOrSkip([folder]);
  if (!started) return;
  const { server, url } = started;
  try {
    const page = await browser.newPage();
    await page.goto(url, { waitUntil: 'load', timeout: 60000 });
    await page.waitForFunction(() => document.body.dataset.ready === 'true', null, { timeout: 30000 });
    await page.waitForFunction(() => window.memsnapInfo.ranks, null, { timeout: 15000 });
    const shown = await page.evaluate(() => ({
      text: `${document.title}\n${document.body.innerText}`,
      runs: [...document.querySelectorAll('#ranks-table tbody tr')].map((r) => r.dataset.run),
    }));
    const raw = shown.text.match(SPOOFING);
    check(!raw, raw ? `hostile names: the served page shows U+${raw[0].codePointAt(0).toString(16).padStart(4, '0')} raw`
      : 'hostile names: the served page shows no bidi or control character raw');
    check(shown.text.includes('rank_0\\u202elmth.exe') && shown.text.includes('rank_1\\x1b[31m\\x07'),
      'hostile names: the page names both files with their escapes');
    check(shown.runs.length === 2 && shown.runs.every((r) => r === '0' || r === '1') && shown.runs[0] !== shown.runs[1],
      `hostile names: each ranks row opens its file (${JSON.stringify(shown.runs)})`);
    await page.close();
  } finally {
    server.kill('SIGINT');
  }
}

async function checkViewInAddress(context, url) {
  const page = await context.newPage();
  await page.goto(`${url}#view=lines&x=index&y=delta&annotations=1&precision=2&run=7&view2=x`,
    { waitUntil: 'load', timeout: 60000 });
  await page.waitForFunction(() => document.body.dataset.ready === 'true', null, { timeout: 30000 });
  const state = await page.evaluate(() => ({ ...window.memsnapState }));
  check(state.stack === 'lines' && state.xMode === 'index' && state.yMode === 'delta'
    && state.showAnnotations === true && state.precisionRequestedMs === 2 && state.stackRun === 0,
  `a link's fragment opens its view (run=7, which the page lacks, ignored): ${JSON.stringify(state)}`);
  check(await page.inputValue('#y-mode') === 'delta' && await page.inputValue('#x-mode') === 'index',
    'the controls show the view the link gave');
  await page.selectOption('#view-mode', 'category');
  const hash = await page.evaluate(() => location.hash);
  check(/view=category/.test(hash) && /x=index/.test(hash), `a change of view rewrites the fragment: ${hash}`);
  await page.reload({ waitUntil: 'load' });
  await page.waitForFunction(() => document.body.dataset.ready === 'true', null, { timeout: 30000 });
  check(await page.evaluate(() => window.memsnapState.stack) === 'category', 'a reload keeps the view');
  // The zoom window: set it as a drag would, then reload.
  await page.selectOption('#view-mode', 'lines');
  await page.evaluate(() => window.memsnapPlot.setScale('x', { min: 500, max: 900 }));
  const zoomed = await page.evaluate(() => location.hash);
  check(/from=500/.test(zoomed) && /to=900/.test(zoomed), `a zoom writes its window: ${zoomed}`);
  await page.reload({ waitUntil: 'load' });
  await page.waitForFunction(() => document.body.dataset.ready === 'true', null, { timeout: 30000 });
  const scale = await page.evaluate(() => ({ ...window.memsnapPlot.scales.x }));
  check(Math.abs(scale.min - 500) < 1e-6 && Math.abs(scale.max - 900) < 1e-6,
    `a reload opens the same window: ${scale.min}..${scale.max}`);
  await page.dblclick('#chart .u-over');
  check(!/from=/.test(await page.evaluate(() => location.hash)), 'a reset of the zoom drops the window');
  // The clicked moment: a link's t= drills into it as a click would; a click writes it.
  await page.goto(`${url}#view=lines&x=time&t=0.05`, { waitUntil: 'load' });
  await page.reload({ waitUntil: 'load' });
  await page.waitForFunction(() => document.body.dataset.ready === 'true', null, { timeout: 30000 });
  const clicked = await page.evaluate(() => ({ t: document.body.dataset.clickedTime,
    rows: document.querySelectorAll('#drilldown tbody tr').length }));
  check(clicked.t === '0.05' && clicked.rows > 0, `a link's t= lists what was live then: ${JSON.stringify(clicked)}`);
  const box = await page.locator('#chart .u-over').boundingBox();
  await page.mouse.click(box.x + box.width * 0.7, box.y + box.height * 0.5);
  const after = await page.evaluate(() => ({ hash: location.hash, t: document.body.dataset.clickedTime }));
  check(after.t && after.hash.includes(`t=${after.t}`), `a click writes its moment: ${after.hash}`);
  await page.close();
}

// Every real fixture with a trace, served together (--fixtures DIR): for
// each, in the event-index view at three zooms of its own trace, the
// allocation view's bands and the band of the rest make up GET /api/line at
// every column and the segment timeline's make up reserved memory; the
// hovered allocation shows the user frames GET /api/allocation gives (which
// test_serve.py checks against memsnap events --json on the same files).
async function fixturePass(page, url) {
  const files = await api(url, '/api/files', {});
  await page.selectOption('#x-mode', 'index');
  let runs = 0;
  for (const f of files) {
    if (!(f.event_count > 0)) continue;
    runs += 1;
    const name = path.basename(f.path);
    await page.evaluate((i) => { window.memsnapAllocations.open(i); window.memsnapSegments.open(i); }, f.file);
    for (const [lo, hi] of [[0, 1], [0.3, 0.6], [0.5, 0.51]]) {
      const before = await page.evaluate(() => [Number(document.body.dataset.allocations || 0), Number(document.body.dataset.segments || 0)]);
      await page.evaluate(([a, b]) => {
        window.memsnapPlot.setScale('x', { min: a, max: b });
        window.memsnapAllocations.refresh();
        window.memsnapSegments.refresh();
      }, [f.event_count * lo, f.event_count * hi]);
      const drew = await page.waitForFunction(([a, s]) => Number(document.body.dataset.allocations || 0) > a
        && Number(document.body.dataset.segments || 0) > s, before, { timeout: 30000 }).then(() => true, () => false);
      if (!check(drew, `${name} ${lo}-${hi}: both band charts drew`)) continue;
      const shown = await page.evaluate(() => ({
        a: window.memsnapInfo.allocations, atop: Array.from(window.memsnapAllocations.stacked.top),
        stop: Array.from(window.memsnapSegments.stacked.top), reserved: window.memsnapSegments.data.reserved,
      }));
      const line = await api(url, '/api/line', { file: f.file, axis: 'event', from: shown.a.from, to: shown.a.to, width: shown.a.width });
      const step = Math.max(1, Math.floor(shown.a.width / 50));
      let bad = 0;
      for (let c = 0; c < shown.a.width; c += step) if (shown.atop[c] !== line.high[c]) bad += 1;
      check(shown.a.run === f.file && bad === 0, `${name} ${lo}-${hi}: allocations and the band make up the line (${shown.a.drawn} drawn, ${bad} columns differ)`);
      check(shown.stop.every((v, c) => v === shown.reserved[c]), `${name} ${lo}-${hi}: segments and the band make up reserved memory`);
    }
    await page.evaluate((n) => { window.memsnapPlot.setScale('x', { min: 0, max: n }); window.memsnapAllocations.refresh(); }, f.event_count);
    const before = await page.evaluate(() => Number(document.body.dataset.allocations || 0));
    await page.waitForFunction((a) => Number(document.body.dataset.allocations || 0) > a, before, { timeout: 30000 }).catch(() => {});
    await page.locator('#allocations-canvas').scrollIntoViewIfNeeded();
    const target = await page.evaluate(() => {
      const v = window.memsnapAllocations;
      const L = v.data;
      if (!L || !L.allocations.length) return null;
      // The largest drawn at least 3 columns wide and 3 pixels high (a thinner
      // band is hard to point at), in its middle.
      const rect = document.getElementById('allocations-canvas').getBoundingClientRect();
      const top = Math.max(1, ...L.high) * 1.05;
      const wide = (i) => v.stacked.bands[i].last - v.stacked.bands[i].first >= 2
        && (Number(L.allocations[i].size) / top) * rect.height >= 3;
      let k = -1;
      L.allocations.forEach((a, i) => { if (wide(i) && (k < 0 || Number(a.size) > Number(L.allocations[k].size))) k = i; });
      if (k < 0) return null;
      const b = v.stacked.bands[k];
      const c = Math.floor((b.first + b.last) / 2);
      const x = L.colFrom + (c + 0.5) * L.colStep;
      return { entry: L.allocations[k].entry, x: rect.left + ((x - L.window.from) / (L.window.to - L.window.from)) * rect.width,
        y: rect.bottom - ((b.bottoms[c - b.first] + Number(L.allocations[k].size) / 2) / top) * rect.height };
    });
    if (!target) continue;
    await page.mouse.move(target.x, target.y);
    const hovered = await page.waitForFunction((e) => document.getElementById('allocations-tip').dataset.entry === String(e)
      && document.getElementById('allocations-tip').dataset.frames !== undefined, target.entry, { timeout: 10000 }).then(() => true, () => false);
    if (!check(hovered, `${name}: hovering entry ${target.entry} shows it`)) continue;
    const expected = await api(url, '/api/allocation', { file: f.file, entry: target.entry });
    const users = expected.frames.filter((fr) => fr.users);
    const wanted = (users.length ? users : expected.frames).slice(0, 6).map((fr) => `${fr.name} ${fr.filename}:${fr.line}`);
    const tip = await page.evaluate(() => [...document.querySelectorAll('#allocations-tip li')].map((li) => li.textContent));
    check(JSON.stringify(tip) === JSON.stringify(wanted), `${name}: the hovered allocation shows its frames (${wanted.length})`);
  }
  check(runs > 0, `${runs} fixtures with a trace served and checked`);
}

async function mainFixtures() {
  if (!fs.existsSync(FIXTURES)) {
    console.log(`skipped: no fixtures at ${FIXTURES}`);
    return SKIPPED;
  }
  const files = fs.readdirSync(FIXTURES).filter((n) => /\.(pickle|pkl)$/.test(n)).sort().map((n) => path.join(FIXTURES, n));
  const started = await startOrSkip(files);
  if (!started) return SKIPPED;
  const { server, url } = started;
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true });
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const problems = [];
    page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
    await page.goto(url, { waitUntil: 'load', timeout: 300000 });
    await page.waitForFunction(() => document.body.dataset.ready === 'true', null, { timeout: 300000 });
    await fixturePass(page, url);
    check(problems.length === 0, `no page error: ${problems.join('; ')}`);
  } finally {
    await browser.close();
    server.kill('SIGINT');
  }
  console.log(failures.length ? `${failures.length} failed` : 'all passed');
  return failures.length ? 1 : 0;
}

async function main() {
  if (FIXTURES && fs.existsSync(CHROMIUM) && MEMSNAP) return mainFixtures();
  if (!MEMSNAP) {
    console.error('usage: test_serve.mjs --memsnap PATH');
    return 2;
  }
  if (!fs.existsSync(CHROMIUM)) {
    console.log(`skipped: no Chromium at ${CHROMIUM}`);
    return SKIPPED;
  }
  const started = await startOrSkip();
  if (!started) return SKIPPED;
  const { server, url } = started;
  const origin = new URL(url).origin;
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true });
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const problems = [];
    await context.route((u) => u.origin !== origin, (route) => {
      problems.push(`request to another origin: ${route.request().url()}`);
      return route.abort();
    });
    const page = await context.newPage();
    page.on('console', (msg) => { if (msg.type() === 'error') problems.push(`console error: ${msg.text()}`); });
    page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
    await page.goto(url, { waitUntil: 'load', timeout: 60000 });
    await page.waitForFunction(() => document.body.dataset.ready === 'true', null, { timeout: 30000 });
    check(await page.isVisible('#search-panel'), 'the served page shows the search panel');
    await checkSearchAndStack(page, url);
    await checkAllocations(page, url);
    await checkSegments(page, url);
    await checkServedAllocator(page, url);
    await checkRanks(page, url);
    await checkViewInAddress(context, url);
    fs.mkdirSync(OUT, { recursive: true });
    await page.locator('#search-panel').screenshot({ path: path.join(OUT, 'serve-search.png') });
    await page.locator('#allocations-panel').screenshot({ path: path.join(OUT, 'serve-allocations.png') });
    await page.locator('#alloc-panel').screenshot({ path: path.join(OUT, 'serve-allocator.png') });
    await page.locator('#segments-panel').screenshot({ path: path.join(OUT, 'serve-segments.png') });
    await page.locator('#ranks-panel').screenshot({ path: path.join(OUT, 'serve-ranks.png') });
    check(problems.length === 0, `no console error, no other origin: ${problems.join('; ')}`);
    await hostileNamesPass(browser);
  } finally {
    await browser.close();
    server.kill('SIGINT');
  }
  console.log(failures.length ? `${failures.length} failed` : 'all passed');
  return failures.length ? 1 : 0;
}

main().then((status) => process.exit(status), (err) => {
  console.error(err.stack || String(err));
  process.exit(1);
});
