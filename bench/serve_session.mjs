#!/usr/bin/env node
// The page in headless Chromium over a big file: what a user waits for.
//
// Served: starts `memsnap serve FILE`, opens the page and runs a scripted
// session of interactions (zooms and pans of the chart, hovers over the
// allocation view, clicks on the chart, searches), timing each from the
// input to the page's answer drawn (performance.now() around the action and
// the page's own counters: the band charts' answers, the allocation tip, the
// allocator panel, the search summary), and samples Chromium's JS heap
// (CDP Performance.getMetrics) after each. Offline: writes `memsnap plot
// FILE` and times the page from navigation to its first draw, with its size
// and heap. A benchmark, not a test: it prints numbers and exits 0.
//
//   node bench/serve_session.mjs --memsnap build/memsnap FILE [--interactions 200]
//        [--chromium /usr/bin/chromium] [--offline-only | --served-only]
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

function option(name, fallback) {
  const at = process.argv.indexOf(name);
  return at >= 0 && process.argv[at + 1] ? process.argv[at + 1] : fallback;
}
const MEMSNAP = option('--memsnap', 'build/memsnap');
const CHROMIUM = option('--chromium', '/usr/bin/chromium');
const INTERACTIONS = Number(option('--interactions', '200'));
const FILE = process.argv[process.argv.length - 1];

// A seeded generator, so that two runs make the same session.
function random(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const percentile = (values, q) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
};

async function heapMiB(cdp) {
  const { metrics } = await cdp.send('Performance.getMetrics');
  const used = metrics.find((m) => m.name === 'JSHeapUsedSize');
  return used ? used.value / 2 ** 20 : NaN;
}

const counter = (page, key) => page.evaluate((k) => Number(document.body.dataset[k] || 0), key);
const waitAbove = (page, key, n) => page.waitForFunction(([k, v]) => Number(document.body.dataset[k] || 0) > v, [key, n], { timeout: 60000 });

async function served(browser) {
  const server = spawn(MEMSNAP, ['serve', FILE], { stdio: ['ignore', 'pipe', 'ignore'] });
  const url = await new Promise((resolve) => {
    let out = '';
    server.stdout.on('data', (chunk) => { out += chunk; if (out.includes('\n')) resolve(out.split('\n')[0].trim()); });
  });
  const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Performance.enable');
  const t0 = Date.now();
  await page.goto(url, { waitUntil: 'load', timeout: 600000 });
  await page.waitForFunction(() => document.body.dataset.ready === 'true', null, { timeout: 600000 });
  await page.waitForFunction(() => Number(document.body.dataset.allocations || 0) > 0 && Number(document.body.dataset.segments || 0) > 0, null, { timeout: 600000 });
  const firstS = (Date.now() - t0) / 1000;
  const rng = random(1);
  const times = {};
  const record = (kind, ms) => { (times[kind] = times[kind] || []).push(ms); };
  // The page's own time: from the input's event to the answer drawn (the
  // band charts' asks, the hover's stack), without the harness' round trips.
  const own = {};
  const recordOwn = (kind, ms) => { (own[kind] = own[kind] || []).push(ms); };
  let heapMax = await heapMiB(cdp);
  const span = await page.evaluate(() => { const d = window.memsnapPlot.data[0]; return [d[0], d[d.length - 1]]; });
  const box = await page.locator('#chart .u-over').boundingBox();
  for (let i = 0; i < INTERACTIONS; i++) {
    const kind = ['zoom', 'pan', 'hover', 'hover', 'click', 'search'][Math.floor(rng() * 6)];
    if (kind === 'zoom' || kind === 'pan') {
      const width = (span[1] - span[0]) * [1, 0.1, 0.01, 0.001][Math.floor(rng() * 4)];
      const from = span[0] + rng() * (span[1] - span[0] - width);
      const [a, s] = [await counter(page, 'allocations'), await counter(page, 'segments')];
      const start = await page.evaluate(([lo, hi]) => { const t = performance.now(); window.memsnapPlot.setScale('x', { min: lo, max: hi });
        // The same window twice asks nothing: ask anyway, to time it.
        window.memsnapAllocations.refresh(); window.memsnapSegments.refresh(); return t; }, [from, from + width]);
      await waitAbove(page, 'allocations', a);
      await waitAbove(page, 'segments', s);
      record(kind, (await page.evaluate(() => performance.now())) - start);
      recordOwn(kind, await page.evaluate(() => Math.max(window.memsnapInfo.allocations.ms, window.memsnapInfo.segments.ms)));
    } else if (kind === 'hover') {
      await page.locator('#allocations-canvas').scrollIntoViewIfNeeded();
      const target = await page.evaluate((r) => {
        const v = window.memsnapAllocations;
        if (!v.data || !v.data.allocations.length) return null;
        const k = Math.floor(r * v.data.allocations.length);
        const b = v.stacked.bands[k];
        const a = v.data.allocations[k];
        const c = Math.floor((b.first + b.last) / 2);
        const rect = document.getElementById('allocations-canvas').getBoundingClientRect();
        const top = Math.max(1, ...v.data.high) * 1.05;
        const x = v.data.colFrom + (c + 0.5) * v.data.colStep;
        return { x: rect.left + ((x - v.data.window.from) / (v.data.window.to - v.data.window.from)) * rect.width,
          y: rect.bottom - ((b.bottoms[c - b.first] + Number(a.size) / 2) / top) * rect.height };
      }, rng());
      if (!target) continue;
      await page.evaluate(() => { const tip = document.getElementById('allocations-tip'); delete tip.dataset.frames; window.hoverStart = performance.now(); });
      await page.mouse.move(target.x, target.y);
      const got = await page.waitForFunction(() => document.getElementById('allocations-tip').dataset.frames !== undefined, null, { timeout: 5000 }).then(() => true, () => false);
      if (got) {
        record(kind, await page.evaluate(() => performance.now() - window.hoverStart));
        recordOwn(kind, await page.evaluate(() => window.memsnapInfo.allocationsHover.ms));
      }
    } else if (kind === 'click') {
      await page.locator('#chart .u-over').scrollIntoViewIfNeeded();
      const asked = await counter(page, 'allocAsked');
      const b = await page.locator('#chart .u-over').boundingBox();
      await page.evaluate(() => { window.clickStart = performance.now(); });
      await page.mouse.click(b.x + b.width * (0.05 + 0.9 * rng()), b.y + b.height / 2);
      await waitAbove(page, 'allocAsked', asked);
      await page.waitForFunction(() => !/Asking|^$/.test(document.getElementById('drill-summary').textContent || 'x'), null, { timeout: 60000 }).catch(() => {});
      record(kind, await page.evaluate(() => performance.now() - window.clickStart));
    } else {
      const q = ['attention', 'optim', 'module.py', 'forward'][Math.floor(rng() * 4)];
      await page.fill('#search-text', q);
      await page.evaluate(() => { document.getElementById('search-summary').textContent = ''; window.searchStart = performance.now(); });
      const a = await counter(page, 'allocations');
      await page.click('#search-form button[type=submit]');
      await page.waitForFunction(() => document.getElementById('search-summary').textContent !== '', null, { timeout: 60000 });
      await waitAbove(page, 'allocations', a);
      record(kind, await page.evaluate(() => performance.now() - window.searchStart));
    }
    heapMax = Math.max(heapMax, await heapMiB(cdp));
  }
  server.kill('SIGINT');
  console.log(`served: page drawn (chart, allocations, segments) ${firstS.toFixed(2)} s after navigation; JS heap at most ${heapMax.toFixed(1)} MiB over the session`);
  const row = (kind, ms) => `${kind.padEnd(12)} ${String(ms.length).padStart(6)} ${percentile(ms, 0.5).toFixed(1).padStart(10)} ${percentile(ms, 0.99).toFixed(1).padStart(8)} ${Math.max(...ms).toFixed(1).padStart(8)}`;
  console.log('as the harness sees it (input to answer drawn, with its own round trips to the browser):');
  console.log('interaction   count  median ms   p99 ms   max ms');
  const every = [];
  for (const [kind, ms] of Object.entries(times)) {
    every.push(...ms);
    console.log(row(kind, ms));
  }
  console.log(row('all', every));
  console.log('as the page measures it (a zoom or pan: the slower of its two band charts\' asks, fetch to drawn; a hover: the event to its stack shown):');
  for (const [kind, ms] of Object.entries(own)) console.log(row(kind, ms));
  await page.close();
}

async function offline(browser) {
  const out = path.join(os.tmpdir(), `memsnap-session-${process.pid}.html`);
  const t0 = Date.now();
  const made = spawnSync(MEMSNAP, ['plot', FILE, '-o', out], { encoding: 'utf8' });
  if (made.status !== 0) throw new Error(made.stderr);
  const plotS = (Date.now() - t0) / 1000;
  const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Performance.enable');
  const t1 = Date.now();
  await page.goto(`file://${out}`, { waitUntil: 'load', timeout: 600000 });
  await page.waitForFunction(() => document.body.dataset.ready === 'true' && Number(document.body.dataset.allocations || 0) > 0, null, { timeout: 600000 });
  const drawS = (Date.now() - t1) / 1000;
  console.log(`offline: plot ${plotS.toFixed(2)} s, page ${(fs.statSync(out).size / 2 ** 20).toFixed(2)} MiB, drawn (chart and allocations) ${drawS.toFixed(2)} s after navigation, JS heap ${(await heapMiB(cdp)).toFixed(1)} MiB`);
  await page.close();
  fs.unlinkSync(out);
}

const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true });
try {
  console.log(`file: ${FILE} (${(fs.statSync(FILE).size / 2 ** 20).toFixed(1)} MiB)`);
  if (!process.argv.includes('--served-only')) await offline(browser);
  if (!process.argv.includes('--offline-only')) await served(browser);
} finally {
  await browser.close();
}
