// Unit tests of web/transforms.js, the DOM-free part of the `memsnap plot`
// page: `node --test tests/web/` (node 18 or later, no npm packages). What
// needs a browser (drawing, controls, the drill-down table against memsnap) is
// tests/browser/test_plot.mjs.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');

const T = require(path.join(__dirname, '..', '..', 'web', 'transforms.js'));
const { mulberry32 } = require('./seeded_random.cjs');

// ---------------------------------------------------------------- helpers


const randInt = (rand, n) => Math.floor(rand() * n);

// What the C++ side writes: base64 of the little-endian bytes of a typed array.
function b64(typed) {
  return Buffer.from(typed.buffer, typed.byteOffset, typed.byteLength).toString('base64');
}

// format_bytes in src/report/format.cc, in exact arithmetic: fmt's "{:.2f}"
// rounds the exact binary value, ties to even.
function referenceFormatBytes(bytes) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];
  const b = BigInt(bytes);
  if (b < 1024n) return `${b} B`;
  let unit = 0;
  while (unit + 1 < units.length && b >= 1024n ** BigInt(unit + 1)) unit += 1;
  const den = 1024n ** BigInt(unit);
  let q = (b * 100n) / den;
  const r2 = ((b * 100n) % den) * 2n;
  if (r2 > den || (r2 === den && q % 2n === 1n)) q += 1n;
  return `${q / 100n}.${String(q % 100n).padStart(2, '0')} ${units[unit]}`;
}

// std::string::compare on UTF-8.
const utf8Compare = (a, b) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));

function randomName(rand) {
  const pool = ['a', 'b', 'z', '_', '<', '\u00e9', '\u4e2d', '\ue000', '\uff21', '\uffff', '\u{1F600}', '\u{10000}', '\u{1F4A9}'];
  let s = '';
  const n = 1 + randInt(rand, 4);
  for (let i = 0; i < n; i++) s += pool[randInt(rand, pool.length)];
  return s;
}

function fineBuckets(rand, count, width) {
  const min = new Float64Array(count);
  const max = new Float64Array(count);
  let v = 0;
  for (let i = 0; i < count; i++) {
    const a = v + (rand() - 0.5) * 1e6;
    const b = a + rand() * 1e6;
    min[i] = Math.round(Math.min(a, b));
    max[i] = Math.round(Math.max(a, b));
    v = max[i];
  }
  return { width, count, min, max };
}

function arrayMax(values, from = 0, to = values.length) {
  let m = -Infinity;
  for (let i = from; i < to; i++) if (values[i] > m) m = values[i];
  return m;
}

function arrayMin(values, from = 0, to = values.length) {
  let m = Infinity;
  for (let i = from; i < to; i++) if (values[i] < m) m = values[i];
  return m;
}

// ---------------------------------------------------------------- formatting

test('formatBytes prints what the C++ format_bytes prints', () => {
  // Produced by src/report/format.cc (fmt 9): note the ties 1.125 -> 1.12.
  const cases = [
    [0, '0 B'], [1, '1 B'], [1023, '1023 B'], [1024, '1.00 KiB'], [1152, '1.12 KiB'],
    [1408, '1.38 KiB'], [1536, '1.50 KiB'], [1664, '1.62 KiB'], [1920, '1.88 KiB'],
    [1048575, '1024.00 KiB'], [1048576, '1.00 MiB'], [2228224, '2.12 MiB'], [1207959552, '1.12 GiB'],
    [2684354560, '2.50 GiB'], [123456789, '117.74 MiB'], [4294967295, '4.00 GiB'],
    [9007199254740991, '8.00 PiB'], [2 ** 60, '1.00 EiB'],
  ];
  for (const [n, want] of cases) assert.equal(T.formatBytes(n), want, `formatBytes(${n})`);
});

test('formatBytes agrees with exact half-to-even rounding on random sizes', () => {
  const rand = mulberry32(7);
  for (let i = 0; i < 20000; i++) {
    // Multiples of 128 hit the exact ties (x.125, x.625) that toFixed rounds up.
    let n = Math.floor(rand() * 2 ** (10 + randInt(rand, 43)));
    if (i % 2 === 0) n -= n % 128;
    assert.equal(T.formatBytes(n), referenceFormatBytes(n), `formatBytes(${n})`);
  }
});

test('formatBytes shows a dash for what is not a number', () => {
  for (const n of [NaN, Infinity, undefined]) assert.equal(T.formatBytes(n), '–');
});

test('formatSignedBytes matches format_signed_bytes', () => {
  assert.equal(T.formatSignedBytes(0), '0 B');
  assert.equal(T.formatSignedBytes(-0), '0 B');
  assert.equal(T.formatSignedBytes(1), '+1 B');
  assert.equal(T.formatSignedBytes(-1023), '-1023 B');
  assert.equal(T.formatSignedBytes(1536), '+1.50 KiB');
  assert.equal(T.formatSignedBytes(-1536), '-1.50 KiB');
  assert.equal(T.formatSignedBytes(-2228224), '-2.12 MiB');
  assert.equal(T.formatSignedBytes(NaN), '–');
});

test('formatCount groups thousands like format_count; signed variant', () => {
  assert.equal(T.formatCount(0), '0');
  assert.equal(T.formatCount(999), '999');
  assert.equal(T.formatCount(1000), '1,000');
  assert.equal(T.formatCount(1234567), '1,234,567');
  assert.equal(T.formatCount(4294967295), '4,294,967,295');
  assert.equal(T.formatCount(2.6), '3');
  assert.equal(T.formatSignedCount(0), '0');
  assert.equal(T.formatSignedCount(1234), '+1,234');
  assert.equal(T.formatSignedCount(-1234567), '-1,234,567');
  assert.equal(T.formatSignedCount(Infinity), '–');
});

test('formatAxisBytes: shortest form, up to 2 decimals, signed', () => {
  assert.equal(T.formatAxisBytes(0), '0');
  assert.equal(T.formatAxisBytes(512), '512 B');
  assert.equal(T.formatAxisBytes(1.5 * 2 ** 30), '1.5 GiB');
  assert.equal(T.formatAxisBytes(512 * 2 ** 20), '512 MiB');
  assert.equal(T.formatAxisBytes(-3 * 2 ** 20), '-3 MiB');
  assert.equal(T.formatAxisBytes(1.25 * 2 ** 10), '1.25 KiB');
});

test('formatSeconds prints microseconds', () => {
  assert.equal(T.formatSeconds(1.5), '1.500000 s');
  assert.equal(T.formatSeconds(0.0000014), '0.000001 s');
  assert.equal(T.formatSeconds(NaN), '–');
});

test('decimalsFor shows every multiple of the tick step exactly', () => {
  assert.equal(T.decimalsFor(0), 0);
  assert.equal(T.decimalsFor(-1), 0);
  // uPlot's steps: 1, 2, 2.5 and 5 times a power of ten.
  for (let e = -6; e <= 6; e++) {
    for (const m of [1, 2, 2.5, 5]) {
      const incr = m * 10 ** e;
      const d = T.decimalsFor(incr);
      assert.ok(d >= 0 && d <= 6);
      if (e < -5) continue; // 2.5e-6 would need 7: capped at 6
      for (let k = 1; k <= 12; k++) {
        const tick = k * incr;
        assert.ok(Math.abs(Number(tick.toFixed(d)) - tick) < incr * 1e-6, `step ${incr}: ${tick} shown as ${tick.toFixed(d)}`);
      }
      // ... and no more decimals than needed.
      if (d > 0) assert.ok(Math.abs(Number(incr.toFixed(d - 1)) - incr) > incr * 1e-6, `step ${incr}: ${d} decimals is too many`);
    }
  }
  assert.equal(T.decimalsFor(1e-9), 6);
});

test('formatIndexTick switches to millions for large steps', () => {
  assert.equal(T.formatIndexTick(1250000, 250000), '1.25M');
  assert.equal(T.formatIndexTick(3000000, 1e6), '3M');
  assert.equal(T.formatIndexTick(1500000, 5e4), '1,500,000');
  assert.equal(T.formatIndexTick(12000, 2000), '12,000');
});

test('formatDuration: seconds from 1 s on, else milliseconds', () => {
  assert.equal(T.formatDuration(12.594388), '12.594 s');
  assert.equal(T.formatDuration(1), '1.000 s');
  assert.equal(T.formatDuration(0.168), '168 ms');
  assert.equal(T.formatDuration(0.280395), '280 ms');
  assert.equal(T.formatDuration(0.000072), '0.072 ms');
  assert.equal(T.formatDuration(0), '0 ms');
  assert.equal(T.formatDuration(NaN), '–');
});

test('tickIncrs: whole events only for the event index, nothing under 1 µs for seconds', () => {
  const index = T.tickIncrs('index');
  const time = T.tickIncrs('time');
  for (const incrs of [index, time]) for (let i = 1; i < incrs.length; i++) assert.ok(incrs[i] > incrs[i - 1]);
  assert.equal(index[0], 1);
  assert.ok(index.every(Number.isInteger));
  assert.ok(index[index.length - 1] >= 1e12);
  assert.equal(time[0], 1e-6);
  assert.ok(time.every((v) => T.decimalsFor(v) <= 6 && Math.abs(v * 1e6 - Math.round(v * 1e6)) < 1e-6));
  assert.ok(time.includes(0.25) && time.includes(0.001) && time.includes(1));
});

test('formatTicks: no repeated label; event indices whole; seconds as exact as the step', () => {
  // A one-event trace: uPlot's default steps go below 1 event.
  assert.deepEqual(T.formatTicks([0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75, 2], 0.25, 'index'), ['0', '', '', '', '1', '', '', '', '2']);
  assert.deepEqual(T.formatTicks([0, 1, 2], 1, 'index'), ['0', '1', '2']);
  assert.deepEqual(T.formatTicks([1e6, 1.25e6, 1.5e6], 2.5e5, 'index'), ['1M', '1.25M', '1.5M']);
  assert.deepEqual(T.formatTicks([0, 1000, 2000], 1000, 'index'), ['0', '1,000', '2,000']);
  assert.deepEqual(T.formatTicks([0, 0.0002, 0.0004], 0.0002, 'time'), ['0.0000', '0.0002', '0.0004']);
  assert.deepEqual(T.formatTicks([0, 0.1, 0.2, 0.30000000000000004], 0.1, 'time'), ['0.0', '0.1', '0.2', '0.3']);
  // Below 1 µs: a split that 6 decimals cannot show gets no label.
  assert.deepEqual(T.formatTicks([0.000001, 0.0000015, 0.000002], 5e-7, 'time'), ['0.000001', '', '0.000002']);
  // A step that claims fewer decimals than the splits need: more decimals.
  assert.deepEqual(T.formatTicks([0, 0.5, 1, 1.5], 1, 'time'), ['0.0', '0.5', '1.0', '1.5']);
  assert.deepEqual(T.formatTicks([null, 1, NaN], 1, 'index'), ['', '1', '']);
  const rand = mulberry32(67);
  for (let round = 0; round < 300; round++) {
    const kind = round % 2 ? 'time' : 'index';
    const incrs = T.tickIncrs(kind);
    const incr = kind === 'index' ? [0.2, 0.25, 0.5, ...incrs.slice(0, 12)][randInt(rand, 15)] : incrs[randInt(rand, 20)];
    const from = Math.ceil((rand() * 100) / incr) * incr;
    const splits = Array.from({ length: 2 + randInt(rand, 12) }, (_, i) => Number((from + i * incr).toPrecision(12)));
    const labels = T.formatTicks(splits, incr, kind);
    const shown = labels.filter((l) => l !== '');
    assert.equal(new Set(shown).size, shown.length, `${kind} ${incr}: ${labels}`);
    labels.forEach((l, i) => {
      if (l === '') return;
      const v = Number(l.replace(/,/g, ''));
      if (kind === 'index') assert.ok(Number.isInteger(v) && v === Math.round(splits[i]), `${splits[i]} -> ${l}`);
      else assert.ok(Math.abs(v - splits[i]) < 1e-9, `${splits[i]} -> ${l}`);
    });
    if (kind === 'index' && incr >= 1) assert.equal(shown.length, splits.length);
  }
});

test('distinguishingNames: the part that tells long labels apart', () => {
  const W = (n) => `Wedsonlin_assignment2-systems__medium_${n}_training_memory_snapshot.pickle`;
  assert.deepEqual(T.distinguishingNames([W(128), W(512)]), ['…medium_128…', '…medium_512…']);
  assert.deepEqual(T.distinguishingNames([W(128), W(512), W(1024)]), ['…medium_128…', '…medium_512…', '…medium_1024…']);
  // Short labels and a single label are left alone.
  assert.deepEqual(T.distinguishingNames(['A', 'B']), ['A', 'B']);
  assert.deepEqual(T.distinguishingNames(['run_a.pickle', 'run_b.pickle']), ['run_a.pickle', 'run_b.pickle']);
  assert.deepEqual(T.distinguishingNames([W(128)]), [W(128)]);
  assert.deepEqual(T.distinguishingNames([]), []);
  // Only a common prefix, only a common suffix; paths.
  assert.deepEqual(T.distinguishingNames(['experiment_2024_baseline_run.pickle', 'experiment_2024_baseline_run.pickle.gz']),
    ['…run.pickle', '…run.pickle.gz']);
  assert.deepEqual(T.distinguishingNames(['alpha_memory_snapshot_rank0.pickle', 'beta_memory_snapshot_rank0.pickle']),
    ['alpha_memory…', 'beta_memory…']);
  assert.deepEqual(T.distinguishingNames(['/home/u/runs/exp_baseline/snapshot_rank0.pickle', '/home/u/runs/exp_bigbatch/snapshot_rank0.pickle']),
    ['…baseline…', '…bigbatch…']);
  assert.deepEqual(T.distinguishingNames(['/home/u/runs/exp_base/snapshot_rank0.pickle', '/home/u/runs/exp_big/snapshot_rank1.pickle']),
    ['…base/snapshot_rank0…', '…big/snapshot_rank1…']);
  // Cuts only at token boundaries: 128 and 1280 share "128" but not a token.
  assert.deepEqual(T.distinguishingNames([W(128), W(1280)]), ['…medium_128…', '…medium_1280…']);
  // A short label next to a long one stays whole.
  assert.deepEqual(T.distinguishingNames(['a.pickle', W(512)]), ['a.pickle', W(512)]);
  // Equal labels, or names that would be equal: never two equal names.
  assert.deepEqual(T.distinguishingNames([W(128), W(128)]), [W(128), `${W(128)} (2)`]);
  assert.deepEqual(T.distinguishingNames(['x', 'x', 'x']), ['x', 'x (2)', 'x (3)']);
  const names = T.distinguishingNames(['long_common_prefix_x_suffix_here', 'long_common_prefix_x-suffix_here']);
  assert.notEqual(names[0], names[1]);
  const rand = mulberry32(71);
  const words = ['a', 'bb', 'medium', '128', '512', 'training', 'snapshot', 'rank0', 'x'];
  const delims = ['_', '-', '.', '/', '__'];
  for (let round = 0; round < 500; round++) {
    const n = 1 + randInt(rand, 4);
    const prefix = Array.from({ length: randInt(rand, 5) }, () => words[randInt(rand, words.length)] + delims[randInt(rand, delims.length)]).join('');
    const suffix = Array.from({ length: randInt(rand, 4) }, () => delims[randInt(rand, delims.length)] + words[randInt(rand, words.length)]).join('');
    const labels = Array.from({ length: n }, () => prefix + words[randInt(rand, words.length)] + (rand() < 0.3 ? delims[randInt(rand, delims.length)] + words[randInt(rand, words.length)] : '') + suffix);
    const out = T.distinguishingNames(labels);
    assert.equal(out.length, n);
    assert.equal(new Set(out).size, n, JSON.stringify({ labels, out }));
    out.forEach((name, i) => {
      if (labels[i].length <= 20) assert.ok(name === labels[i] || name.startsWith(`${labels[i]} (`), `${labels[i]} -> ${name}`);
      // A shortened name is a piece of its label, cut at token boundaries.
      const core = name.replace(/^…/, '').replace(/…$/, '');
      if (core !== name) {
        assert.ok(name.length < labels[i].length);
        assert.ok(core.length >= 8, `${labels[i]} -> ${name}: under 8 characters of context`);
        // Token boundaries: what was cut off ends (or starts) with a delimiter.
        const fits = (at) => (!name.startsWith('…') || /[_\-./]$/.test(labels[i].slice(0, at)))
          && (!name.endsWith('…') || /^[_\-./]/.test(labels[i].slice(at + core.length)));
        let ok = false;
        for (let at = labels[i].indexOf(core); at >= 0 && !ok; at = labels[i].indexOf(core, at + 1)) ok = fits(at);
        assert.ok(ok, `${labels[i]} -> ${name}`);
      }
    });
  }
});

test('esc escapes the five HTML metacharacters and nothing else', () => {
  assert.equal(T.esc(`<a href="x">'&'</a>`), '&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;');
  assert.equal(T.esc('&amp;'), '&amp;amp;');
  assert.equal(T.esc('plain text, ü \u{1F600}'), 'plain text, ü \u{1F600}');
  assert.equal(T.esc(42), '42');
  const rand = mulberry32(3);
  const unescape = (s) => s.replace(/&(amp|lt|gt|quot|#39);/g, (m, e) => ({ amp: '&', lt: '<', gt: '>', quot: '"', '#39': "'" })[e]);
  for (let i = 0; i < 500; i++) {
    let s = '';
    for (let k = randInt(rand, 12); k > 0; k--) s += '<>&"\'a;#'[randInt(rand, 8)];
    const e = T.esc(s);
    assert.ok(!/[<>"']/.test(e), e);
    assert.ok(!/&(?!(amp|lt|gt|quot|#39);)/.test(e), e);
    assert.equal(unescape(e), s);
  }
});

// Issue 56, finding 4: a file name with U+202E, ESC or BEL reads as spelled,
// not reversed, in the page's cards, legend and tables: the same escapes as
// the C++ printable() (tests/unit/test_report_words.cc, the same strings).
test('printable shows spoofing and control characters as the text reports do', () => {
  const evil = 'train\u202Eyp.exe\u2066x\u2069 \u2028next \u200F\u{E0041}\u{E007F} caf\u00e9 \u4e2d';
  const shown = 'train\\u202eyp.exe\\u2066x\\u2069 \\u2028next \\u200f\\U000e0041\\U000e007f caf\u00e9 \u4e2d';
  assert.equal(T.printable(evil), shown);
  assert.equal(T.printable('\x1b[31m\u0085'), '\\x1b[31m\\u0085');
  assert.equal(T.printable('a\x07b\x7f\n\r\t'), 'a\\x07b\\x7f\\n\\r\\t');
  assert.equal(T.printable('exe.html\u202e'), 'exe.html\\u202e');
  assert.equal(T.printable('plain ü \u{1F600} <&>'), 'plain ü \u{1F600} <&>');
  assert.equal(T.printable(42), '42');
});

test('withAlpha turns #rrggbb into rgba()', () => {
  assert.equal(T.withAlpha('#2563eb', 0.5), 'rgba(37, 99, 235, 0.5)');
  assert.equal(T.withAlpha('#000000', 1), 'rgba(0, 0, 0, 1)');
});

test('compareNames orders like std::string::compare on UTF-8', () => {
  // The case plain `<` gets wrong: an astral character against U+E000..U+FFFF.
  assert.ok(T.compareNames('\u{1F600}', '\uffff') > 0);
  assert.ok('\u{1F600}' < '\uffff');
  assert.equal(T.compareNames('abc', 'abc'), 0);
  assert.ok(T.compareNames('ab', 'abc') < 0);
  const rand = mulberry32(11);
  for (let i = 0; i < 5000; i++) {
    const a = randomName(rand);
    const b = randomName(rand);
    assert.equal(Math.sign(T.compareNames(a, b)), Math.sign(utf8Compare(a, b)), `${JSON.stringify(a)} vs ${JSON.stringify(b)}`);
  }
});

// ---------------------------------------------------------------- decoding

test('decodeBase64 returns the bytes', () => {
  assert.deepEqual(Array.from(T.decodeBase64('AAEC/w==')), [0, 1, 2, 255]);
  assert.equal(T.decodeBase64('').length, 0);
  assert.equal(T.decodeBase64(null).length, 0);
});

test('column decodes both kinds the C++ side writes (f64, u32)', () => {
  const f = new Float64Array([0, -1, 1.5, 2 ** 53, -0, 1e-300, Infinity, NaN, 0xffffffff]);
  const u = new Uint32Array([0, 1, 0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff]);
  for (const littleEndianHost of [true, false]) {
    const df = T.column(b64(f), f.length, 'f64', 'x', littleEndianHost);
    assert.ok(df instanceof Float64Array);
    assert.equal(df.length, f.length);
    for (let i = 0; i < f.length; i++) assert.ok(Object.is(df[i], f[i]), `f64[${i}]: ${df[i]} != ${f[i]}`);
    const du = T.column(b64(u), u.length, 'u32', 'x', littleEndianHost);
    assert.ok(du instanceof Uint32Array);
    assert.deepEqual(Array.from(du), Array.from(u));
  }
  assert.equal(T.column('', 0, 'f64', 'x').length, 0);
});

test('column refuses a length that does not match count', () => {
  const f = b64(new Float64Array([1, 2, 3]));
  assert.throws(() => T.column(f, 4, 'f64', 'runs[0].time_buckets.min'),
    { message: 'runs[0].time_buckets.min: expected 4 f64 values (32 bytes), got 24 bytes' });
  assert.throws(() => T.column(f, 2, 'f64', 'x'), /expected 2 f64 values \(16 bytes\), got 24 bytes/);
  // 24 bytes are 6 u32 values, not 3.
  assert.throws(() => T.column(f, 3, 'u32', 'x'), /expected 3 u32 values \(12 bytes\), got 24 bytes/);
  assert.throws(() => T.column('', 1, 'u32', 'x'), /got 0 bytes/);
  assert.throws(() => T.column(b64(new Uint8Array(5)), 1, 'u32', 'x'), /got 5 bytes/);
  assert.throws(() => T.column(f, 3, 'u64', 'x'), /unknown column type u64/);
});

test('count reads a positive count, else 0', () => {
  assert.equal(T.count({ count: 3 }), 3);
  assert.equal(T.count({ count: 0 }), 0);
  assert.equal(T.count({ count: -2 }), 0);
  assert.equal(T.count({ count: 'x' }), 0);
  assert.equal(T.count(null), 0);
  assert.equal(T.count(undefined), 0);
});

test('decodeBuckets: f64 min and max, positive (possibly fractional) width', () => {
  const min = new Float64Array([0, -5, 7]);
  const max = new Float64Array([3, 9, 7]);
  const raw = { bucket_events: 15.2587890625, count: 3, min: b64(min), max: b64(max) };
  const d = T.decodeBuckets(raw, 'bucket_events', 'idx');
  assert.equal(d.width, 15.2587890625);
  assert.equal(d.count, 3);
  assert.deepEqual(Array.from(d.min), [0, -5, 7]);
  assert.deepEqual(Array.from(d.max), [3, 9, 7]);
  assert.equal(T.decodeBuckets({ bucket_us: 1000, count: 0, min: '', max: '' }, 'bucket_us', 't'), null);
  assert.equal(T.decodeBuckets(undefined, 'bucket_us', 't'), null);
  assert.throws(() => T.decodeBuckets({ ...raw, bucket_events: 0 }, 'bucket_events', 'idx'), /idx: bucket_events must be positive/);
  assert.throws(() => T.decodeBuckets({ ...raw, count: 4 }, 'bucket_events', 'idx'), /idx\.min: expected 4 f64/);
});

test('decodeLifetimes: times u32 or f64 per time_type, size per size_type, source u32', () => {
  const u32 = {
    count: 2, time_type: 'u32',
    start_us: b64(new Uint32Array([0, 10])), end_us: b64(new Uint32Array([5, 0xffffffff])),
    size: b64(new Float64Array([512, 2 ** 40])), source: b64(new Uint32Array([1, 0])),
  };
  const a = T.decodeLifetimes(u32, 'life');
  assert.equal(a.f64, false);
  assert.ok(a.start instanceof Uint32Array && a.end instanceof Uint32Array);
  assert.deepEqual(Array.from(a.end), [5, 0xffffffff]);
  assert.deepEqual(Array.from(a.size), [512, 2 ** 40]);
  assert.deepEqual(Array.from(a.source), [1, 0]);
  const f64 = { ...u32, time_type: 'f64', start_us: b64(new Float64Array([0, 2 ** 33])), end_us: b64(new Float64Array([5, -1])) };
  const b = T.decodeLifetimes(f64, 'life');
  assert.equal(b.f64, true);
  assert.deepEqual(Array.from(b.start), [0, 2 ** 33]);
  assert.deepEqual(Array.from(b.end), [5, -1]);
  // u32 times declared as f64 are half the expected length.
  assert.throws(() => T.decodeLifetimes({ ...u32, time_type: 'f64' }, 'life'), /life\.start_us: expected 2 f64 values/);
  assert.equal(T.decodeLifetimes({ count: 0 }, 'life'), null);
  assert.equal(a.startEvent, undefined);
  assert.equal(T.hasEventIndex(a), false);
  assert.equal(T.hasEventIndex(null), true); // no allocations: nothing to index
  // Sizes: f64 unless size_type says u32.
  const small = T.decodeLifetimes({ ...u32, size_type: 'u32', size: b64(new Uint32Array([512, 0xffffffff])) }, 'life');
  assert.deepEqual(Array.from(small.size), [512, 0xffffffff]);
  assert.throws(() => T.decodeLifetimes({ ...u32, size_type: 'u32' }, 'life'), /life\.size: expected 2 u32 values/);
  // Optional event indices (u32, 0xffffffff: still live).
  const ev = T.decodeLifetimes({ ...u32, start_event: b64(new Uint32Array([3, 7])), end_event: b64(new Uint32Array([9, 0xffffffff])) }, 'life');
  assert.deepEqual(Array.from(ev.startEvent), [3, 7]);
  assert.deepEqual(Array.from(ev.endEvent), [9, 0xffffffff]);
  assert.equal(T.hasEventIndex(ev), true);
  assert.throws(() => T.decodeLifetimes({ ...u32, start_event: b64(new Uint32Array([3])), end_event: b64(new Uint32Array([9, 1])) }, 'life'),
    /life\.start_event: expected 2 u32 values/);
  // One column without the other: ignored, like none.
  assert.equal(T.decodeLifetimes({ ...u32, start_event: b64(new Uint32Array([3, 7])) }, 'life').startEvent, undefined);
});

test('annotationDepths: depth = earlier annotations still open at the start', () => {
  const list = [
    { start_s: 0, end_s: 10 }, { start_s: 1, end_s: 3 }, { start_s: 2, end_s: 2.5 },
    { start_s: 3, end_s: 4 }, { start_s: 10, end_s: null }, { start_s: 11, end_s: 12 },
  ];
  assert.deepEqual(T.annotationDepths(list), [0, 1, 2, 1, 0, 1]);
  const rand = mulberry32(5);
  for (let round = 0; round < 50; round++) {
    const n = randInt(rand, 12);
    const items = Array.from({ length: n }, () => {
      const start = randInt(rand, 20);
      return { start_s: start, end_s: rand() < 0.2 ? null : start + randInt(rand, 8) };
    });
    const depth = T.annotationDepths(items);
    const order = items.map((_, i) => i).sort((a, b) => items[a].start_s - items[b].start_s);
    order.forEach((i, pos) => {
      const open = order.slice(0, pos).filter((j) => (items[j].end_s == null ? Infinity : items[j].end_s) > items[i].start_s);
      assert.equal(depth[i], open.length);
    });
  }
});

test('prepareRun decodes a run of the data contract', () => {
  const raw = {
    label: '', file: '/x/a.pickle', device: 1,
    stats: { baseline: 4096, duration_s: 0.0105 },
    time_buckets: { bucket_us: 1000, count: 2, min: b64(new Float64Array([0, 1])), max: b64(new Float64Array([2, 3])) },
    index_buckets: { bucket_events: 1, count: 1, min: b64(new Float64Array([0])), max: b64(new Float64Array([3])) },
    reserved: { count: 1, t_us: b64(new Float64Array([0])), bytes: b64(new Float64Array([2 ** 21])) },
    steps: [{ step: 1, start_s: 0, end_s: null }],
    annotations: [{ name: 'a', start_s: 0, end_s: 1 }, { name: 'b', start_s: 0.5, end_s: 0.7 }],
    oom: [],
    sources: ['f@x.py:1', 7],
    lifetimes: { count: 0, time_type: 'u32', start_us: '', end_us: '', size: '', source: '' },
  };
  const run = T.prepareRun(raw, 2);
  assert.equal(run.label, 'run 3');
  assert.equal(run.baseline, 4096);
  assert.equal(run.timeSpanUs, 2000);
  assert.equal(run.durationS, 0.0105); // stats.duration_s is longer than the buckets
  assert.deepEqual(Array.from(run.reserved.bytes), [2 ** 21]);
  assert.deepEqual(run.sources, ['f@x.py:1', '7']);
  assert.deepEqual(run.annotationDepth, [0, 1]);
  assert.equal(run.life, null);
  assert.equal(T.prepareRun({ ...raw, time_buckets: { count: 0 } }, 0).durationS, 0);
  assert.throws(() => T.prepareRun({ ...raw, reserved: { ...raw.reserved, count: 2 } }, 0), /runs\[0\]\.reserved\.t_us/);
  assert.equal(run.whatif, null);
  assert.equal(run.reservedByEntry, null);
  const byEntry = { count: 2, entry: b64(new Float64Array([0, 5])), bytes: b64(new Float64Array([2 ** 21, 2 ** 22])) };
  const indexed = T.prepareRun({ ...raw, reserved_by_entry: byEntry }, 0).reservedByEntry;
  assert.deepEqual([Array.from(indexed.t), Array.from(indexed.bytes)], [[0, 5], [2 ** 21, 2 ** 22]]);
  assert.throws(() => T.prepareRun({ ...raw, reserved_by_entry: { ...byEntry, entry: byEntry.bytes.slice(0, 4) } }, 0),
    /runs\[0\]\.reserved_by_entry\.entry/);
  // plot --whatif: the simulated line, or why a run has none.
  const whatif = {
    settings: 'expandable_segments:True', possible: true, impossible_reason: null, capacity: 2 ** 30,
    capacity_from: 'oom', peak_reserved: 2 ** 22, recorded_peak_reserved: 2 ** 21, model_ooms: 1,
    model_segments_exact: true, reserved: raw.reserved,
  };
  const simulated = T.prepareRun({ ...raw, whatif }, 0).whatif;
  assert.equal(simulated.settings, 'expandable_segments:True');
  assert.deepEqual([simulated.peak, simulated.recordedPeak, simulated.capacity, simulated.modelOoms, simulated.exact],
    [2 ** 22, 2 ** 21, 2 ** 30, 1, true]);
  assert.deepEqual(Array.from(simulated.reserved.bytes), [2 ** 21]);
  assert.equal(simulated.reservedByEntry, null);
  const entryOnly = T.prepareRun({ ...raw, whatif: { ...whatif, reserved: null, reserved_by_entry: byEntry } }, 0).whatif;
  assert.deepEqual([entryOnly.reserved, Array.from(entryOnly.reservedByEntry.t)], [null, [0, 5]]);
  const impossible = T.prepareRun({ ...raw, whatif: { ...whatif, possible: false, impossible_reason: 'no blocks', reserved: null } }, 0);
  assert.deepEqual([impossible.whatif, impossible.whatifReason], [null, 'no blocks']);
  assert.throws(() => T.prepareRun({ ...raw, whatif: { ...whatif, reserved: { ...raw.reserved, count: 3 } } }, 0), /runs\[0\]\.whatif\.reserved\.t_us/);
});

// ---------------------------------------------------------------- aggregation

function checkRegroup(fine, edges, offset) {
  const { lo, hi, last } = T.regroup(fine, edges, offset);
  const span = fine.count * fine.width;
  assert.equal(lo.length, edges.length);
  assert.equal(hi.length, edges.length);
  // The display buckets up to `last` cover the whole span, no more.
  assert.ok(last >= 0);
  assert.ok(edges[last + 1] >= span - 1e-9 * span, `edges[${last + 1}] = ${edges[last + 1]} < span ${span}`);
  assert.ok(edges[last] < span);
  // Peak and trough survive.
  assert.equal(arrayMax(hi, 0, last + 1), arrayMax(fine.max) + offset);
  assert.equal(arrayMin(lo, 0, last + 1), arrayMin(fine.min) + offset);
  // Each display bucket is the min/max over the base buckets overlapping it.
  for (let j = 0; j <= last; j++) {
    const i0 = Math.floor(edges[j] / fine.width + 1e-9);
    const i1 = Math.min(fine.count, Math.max(i0 + 1, Math.ceil(edges[j + 1] / fine.width - 1e-9)));
    assert.equal(hi[j], arrayMax(fine.max, i0, i1) + offset, `hi[${j}]`);
    assert.equal(lo[j], arrayMin(fine.min, i0, i1) + offset, `lo[${j}]`);
  }
  // The closing entry repeats the last bucket; nothing past the run's end.
  assert.equal(hi[last + 1], hi[last]);
  assert.equal(lo[last + 1], lo[last]);
  for (let j = last + 2; j < edges.length; j++) assert.ok(hi[j] === null && lo[j] === null);
}

test('regroup keeps min and max on uniform grids, integer and fractional widths', () => {
  const rand = mulberry32(17);
  for (const width of [1, 1000, 15.2587890625]) {
    for (let round = 0; round < 30; round++) {
      const fine = fineBuckets(rand, 1 + randInt(rand, 400), width);
      const k = 1 + randInt(rand, 40);
      const G = k * width;
      const span = fine.count * width;
      checkRegroup(fine, T.uniformEdges(G, span), round % 2 ? 3 * 2 ** 30 : 0);
    }
  }
});

test('regroup on a grid longer than the run (overlay of a shorter run)', () => {
  const rand = mulberry32(19);
  const fine = fineBuckets(rand, 50, 1000);
  const edges = T.uniformEdges(3000, 200000);
  checkRegroup(fine, edges, 0);
  const { last } = T.regroup(fine, edges, 0);
  assert.equal(last, 16); // 17 buckets of 3 ms cover 50 ms
});

test('regroup on zoomed (non-uniform) edges', () => {
  const rand = mulberry32(23);
  for (let round = 0; round < 30; round++) {
    const base = round % 2 ? 1 : 15.2587890625;
    const fine = fineBuckets(rand, 200 + randInt(rand, 2000), base);
    const span = fine.count * base;
    const grid = T.indexGrid(base, span, { min: rand() * span * 0.4, max: span * (0.4 + rand() * 0.05) }, 50);
    checkRegroup(fine, grid.edges, 0);
  }
});

// Stack data as memsnap writes it: stack bucket i spans `per` of the run's
// buckets and its layers (random integers, the first possibly negative: memory
// from before the trace less unmatched frees) sum to baseline + the largest
// max of the buckets it spans.
function stackFor(rand, fine, per, layerCount, baseline) {
  const count = Math.ceil(fine.count / per);
  const layers = Array.from({ length: layerCount }, () => new Float64Array(count));
  for (let i = 0; i < count; i++) {
    let rest = baseline + arrayMax(fine.max, i * per, Math.min(fine.count, (i + 1) * per));
    for (let k = layerCount - 1; k > 0; k--) {
      const part = Math.round(rand() * Math.abs(rest) * 0.5);
      layers[k][i] = part;
      rest -= part;
    }
    layers[0][i] = rest;
  }
  return { per, count, layers };
}

test('regroupStacked: the layers of every display bucket sum to its max, cumulative tops it', () => {
  const rand = mulberry32(41);
  for (let round = 0; round < 60; round++) {
    const base = round % 3 === 0 ? 15.2587890625 : 1 + randInt(rand, 1000);
    const fine = fineBuckets(rand, 1 + randInt(rand, 3000), base);
    const per = 1 + randInt(rand, 8);
    const baseline = round % 2 ? 3 * 2 ** 30 : 0;
    const stack = stackFor(rand, fine, per, 1 + randInt(rand, 12), baseline);
    const width = base * per;
    const span = fine.count * base;
    const grids = [
      T.uniformEdges(width * (1 + randInt(rand, 20)), span),
      T.indexGrid(width, span, { min: rand() * span * 0.4, max: span * (0.4 + rand() * 0.05) }, 50).edges,
    ];
    for (const edges of grids) {
      const { hi, last } = T.regroup(fine, edges, baseline);
      const g = T.regroupStacked(stack, width, edges);
      assert.equal(g.last, last);
      const top = T.cumulative(g.layers).at(-1);
      for (let j = 0; j <= last + 1; j++) {
        let sum = 0;
        for (const row of g.layers) sum += row[j];
        assert.equal(sum, hi[j], `round ${round}: bucket ${j}: layers sum to ${sum}, max ${hi[j]}`);
        assert.equal(top[j], hi[j]);
      }
      for (let j = last + 2; j < edges.length; j++) assert.ok(g.layers.every((row) => row[j] === null));
    }
  }
});

test('regroupStacked: a display bucket takes the first stack bucket with the largest total', () => {
  // Buckets 1 and 3 tie at 6 with different layers: the first one wins.
  const stack = { per: 1, count: 4, layers: [new Float64Array([1, 5, 2, 4]), new Float64Array([0, 1, 0, 2])] };
  assert.deepEqual(T.regroupStacked(stack, 10, [0, 40]).layers, [[5, 5], [1, 1]]);
  assert.deepEqual(T.regroupStacked(stack, 10, [0, 20, 40]).layers, [[5, 4, 4], [1, 2, 2]]);
  assert.deepEqual(T.cumulative([[1, null], [2, null]]), [[1, null], [3, null]]);
});

test('decodeStacks: names per layer, one column per layer, refusals', () => {
  const f64 = (values) => Buffer.from(new Float64Array(values).buffer).toString('base64');
  const raw = {
    category: {
      layers: ['before the trace', 'activation'],
      time: { per_bucket: 2, count: 2, layers: [f64([1, 2]), f64([3, 4])] },
      index: { per_bucket: 1, count: 0, layers: [] },
    },
  };
  const s = T.decodeStacks(raw, 'stacks');
  assert.deepEqual(s.category.names, ['before the trace', 'activation']);
  assert.equal(s.category.time.per, 2);
  assert.deepEqual(Array.from(s.category.time.layers[1]), [3, 4]);
  assert.equal(s.category.index, null);
  assert.equal(s.source, undefined);
  assert.equal(T.decodeStacks(undefined, 'stacks'), null);
  assert.throws(() => T.decodeStacks({ category: { ...raw.category, time: { ...raw.category.time, per_bucket: 0 } } }, 's'), /per_bucket/);
  assert.throws(() => T.decodeStacks({ category: { ...raw.category, time: { ...raw.category.time, layers: [f64([1, 2])] } } }, 's'), /1 layers for 2 names/);
  assert.throws(() => T.decodeStacks({ category: { ...raw.category, time: { ...raw.category.time, count: 3 } } }, 's'), /layers\[0\]/);
});

test('regroupSteps: largest reserved value in effect during each bucket', () => {
  const rand = mulberry32(29);
  for (let round = 0; round < 100; round++) {
    const n = randInt(rand, 20);
    const times = new Set();
    while (times.size < n) times.add(randInt(rand, 100));
    const t = Float64Array.from([...times].sort((a, b) => a - b));
    const bytes = Float64Array.from(t, () => randInt(rand, 1000));
    const edges = T.uniformEdges(1 + randInt(rand, 15), 100);
    const last = edges.length - 2 - randInt(rand, 2);
    const out = T.regroupSteps({ t, bytes, count: n }, edges, last);
    assert.equal(out.length, edges.length);
    for (let j = 0; j <= last; j++) {
      // Value q is in effect over [t[q], t[q+1]).
      let want = null;
      for (let q = 0; q < n; q++) {
        const until = q + 1 < n ? t[q + 1] : Infinity;
        if (t[q] < edges[j + 1] && until > edges[j]) want = want === null ? bytes[q] : Math.max(want, bytes[q]);
      }
      assert.equal(out[j], want, `bucket ${j} [${edges[j]}, ${edges[j + 1]})`);
    }
    if (last >= 0) assert.equal(out[last + 1], out[last]);
    for (let j = last + 2; j < edges.length; j++) assert.equal(out[j], null);
  }
});

test('groupRunsByPeak: runs within 1% of their group\'s lowest peak, highest group first', () => {
  const run = (ordinal, peak) => ({ ordinal, stats: { absolute_peak: peak } });
  const runs = [run(0, 1000), run(1, 1009), run(2, 1011), run(3, 5000), run(4, 1005), run(5, 1010)];
  assert.deepEqual(T.groupRunsByPeak(runs), [
    { members: [3], peakMin: 5000, peakMax: 5000 },
    { members: [2], peakMin: 1011, peakMax: 1011 },
    { members: [0, 1, 4, 5], peakMin: 1000, peakMax: 1010 },
  ]);
  assert.deepEqual(T.groupRunsByPeak([]), []);
  const rand = mulberry32(37);
  for (let round = 0; round < 50; round++) {
    const list = Array.from({ length: 1 + randInt(rand, 40) }, (_, i) => run(i, randInt(rand, 5) * 1000 + randInt(rand, 20)));
    const groups = T.groupRunsByPeak(list);
    assert.equal(groups.reduce((n, g) => n + g.members.length, 0), list.length, 'every run in one group');
    for (const g of groups) {
      for (const o of g.members) {
        const peak = list[o].stats.absolute_peak;
        assert.ok(peak >= g.peakMin && peak <= g.peakMax && peak <= g.peakMin * 1.01);
      }
    }
    for (let k = 1; k < groups.length; k++) assert.ok(groups[k - 1].peakMin > groups[k].peakMax);
  }
});

test('stepValueAt: the last point at or before x, null before the first', () => {
  const series = { t: Float64Array.from([0, 10, 10, 25]), bytes: Float64Array.from([5, 7, 8, 3]), count: 4 };
  assert.equal(T.stepValueAt(series, -1), null);
  assert.equal(T.stepValueAt(series, 0), 5);
  assert.equal(T.stepValueAt(series, 9.9), 5);
  assert.equal(T.stepValueAt(series, 10), 8, 'of two points at one time, the later holds');
  assert.equal(T.stepValueAt(series, 24), 8);
  assert.equal(T.stepValueAt(series, 1e9), 3);
  assert.equal(T.stepValueAt(null, 3), null);
  const rand = mulberry32(31);
  for (let round = 0; round < 50; round++) {
    const n = 1 + randInt(rand, 30);
    const t = Float64Array.from(Array.from({ length: n }, () => randInt(rand, 100)).sort((a, b) => a - b));
    const bytes = Float64Array.from(t, () => randInt(rand, 1000));
    const x = randInt(rand, 110) - 5;
    let want = null;
    for (let q = 0; q < n; q++) if (t[q] <= x) want = bytes[q];
    assert.equal(T.stepValueAt({ t, bytes, count: n }, x), want);
  }
});

test('uniformEdges: from 0 in steps of G, the fewest that cover the span', () => {
  assert.deepEqual(T.uniformEdges(2, 10), [0, 2, 4, 6, 8, 10]);
  assert.deepEqual(T.uniformEdges(3, 10), [0, 3, 6, 9, 12]);
  assert.deepEqual(T.uniformEdges(5, 0), [0, 5]);
  // Float spans a hair over a multiple do not get an extra bucket.
  assert.equal(T.uniformEdges(0.1, 0.30000000000000004).length, 4);
  const rand = mulberry32(31);
  for (let round = 0; round < 200; round++) {
    const G = 0.5 + rand() * 100;
    const span = rand() * 1e5;
    const e = T.uniformEdges(G, span);
    e.forEach((x, j) => assert.equal(x, j * G));
    assert.ok(e[e.length - 1] >= span * (1 - 1e-9));
    assert.ok(e.length === 2 || e[e.length - 2] < span);
  }
});

test('zoomedEdges: fine steps inside [from, to), coarse outside, monotonic, covering the span', () => {
  assert.deepEqual(T.zoomedEdges(10, 2, 20, 30, 50), [0, 10, 20, 22, 24, 26, 28, 30, 40, 50]);
  const rand = mulberry32(37);
  for (let round = 0; round < 300; round++) {
    const base = round % 3 ? 1 : 15.2587890625;
    const coarse = base * (2 + randInt(rand, 50));
    const fine = base * (1 + randInt(rand, Math.round(coarse / base) - 1));
    const nCoarse = 1 + randInt(rand, 60);
    const span = base * Math.ceil(((nCoarse - 1) * coarse + rand() * coarse) / base);
    const a = randInt(rand, nCoarse);
    const b = a + 1 + randInt(rand, nCoarse - a);
    const from = a * coarse;
    const to = b * coarse;
    const e = T.zoomedEdges(coarse, fine, from, to, span);
    assert.equal(e[0], 0);
    assert.ok(e[e.length - 1] >= span && e[e.length - 2] < span, 'covers the span, no more');
    for (let j = 1; j < e.length; j++) {
      const x = e[j - 1];
      assert.ok(e[j] > x, 'strictly increasing');
      assert.equal(e[j] - x, x >= from && x < to ? fine : coarse, `step after ${x}`);
      assert.ok(Math.abs(e[j] / base - Math.round(e[j] / base)) < 1e-9, 'a multiple of the base bucket');
    }
    // The window starts on an edge, is cut in ceil((to - from) / fine) fine
    // steps, and the last of them ends less than one fine step past `to`.
    if (from < span) assert.ok(e.includes(from));
    if (to <= span) {
      assert.equal(e.filter((x) => x > from && x < to).length, Math.ceil((to - from) / fine - 1e-9) - 1);
      const after = e.find((x) => x >= to);
      assert.ok(after < to + fine);
    }
  }
});

test('timeGrid: multiple of the base bucket, clamped, with the reason', () => {
  let g = T.timeGrid(1000, 1e6, 1);
  assert.equal(g.G, 1000);
  assert.equal(g.warn, '');
  assert.equal(g.edges.length, 1001);
  g = T.timeGrid(1000, 1e6, 0.1);
  assert.equal(g.G, 1000);
  assert.equal(g.reason, 'finer');
  assert.equal(g.warn, 'Precision: asked for 0.1 ms, showing 1 ms, the finest buckets this file records.');
  g = T.timeGrid(1000, 1e6, 2.4);
  assert.equal(g.G, 2000);
  assert.equal(g.warn, 'Precision: asked for 2.4 ms, showing 2 ms, a whole number of the recorded 1 ms buckets.');
  g = T.timeGrid(1000, 1e6, 5);
  assert.equal(g.G, 5000);
  assert.equal(g.warn, '');
  // 1000 s at 1 ms would be 1e6 buckets: limited to TIME_POINT_LIMIT.
  g = T.timeGrid(1000, 1e9, 1);
  assert.equal(g.G, 20000);
  assert.equal(g.edges.length - 1, T.TIME_POINT_LIMIT);
  assert.equal(g.warn, 'Precision: asked for 1 ms, showing 20 ms, the finest that keeps at most 50,000 points per run.');
  assert.equal(T.timeGrid(1000, 50000 * 1000, 1).G, 1000);
  assert.equal(T.timeGrid(1000, 50001 * 1000, 1).G, 2000);
  const rand = mulberry32(41);
  for (let round = 0; round < 300; round++) {
    const base = [1, 100, 1000, 2500][randInt(rand, 4)];
    const span = base * (1 + randInt(rand, 2e6));
    const requested = rand() * 50;
    const limit = 100 + randInt(rand, 1000);
    const r = T.timeGrid(base, span, requested, limit);
    const k = r.G / base;
    assert.ok(Number.isInteger(k) && k >= 1);
    assert.ok(r.edges.length - 1 <= limit, `${r.edges.length - 1} buckets > ${limit}`);
    assert.ok(r.edges[r.edges.length - 1] >= span);
    if (r.reason === '') assert.ok(Math.abs(r.G - requested * 1000) <= base * 1e-6);
    if (r.reason === 'finer') assert.ok(requested * 1000 < base && r.G === base);
    if (r.warn) assert.match(r.warn, /^Precision: asked for [\d.,]+ ms, showing [\d.,]+ ms, [^.]*(\d\.\d[^.]*)*\.$/);
  }
});

test('timeGrid: one note, never two contradicting ones (finer than the buckets and over the limit)', () => {
  // The C++ side writes duration / 65536 wide buckets for long traces:
  // 0.1 ms asked for is finer than 1.795 ms buckets, and 1.795 ms gives more
  // than 50,000 points. One reason, the one that decided the precision drawn.
  const base = 117647.0588 / 65536 * 1000; // about 1.795 ms
  const span = base * 65536;
  const g = T.timeGrid(base, span, 0.1);
  assert.equal(g.G, 2 * base);
  assert.equal(g.reason, 'limit');
  assert.equal(g.warn, 'Precision: asked for 0.1 ms, showing 3.59 ms, the finest that keeps at most 50,000 points per run.');
  assert.equal(g.warn.match(/showing/g).length, 1);
  // Asking for what the note says is shown gives no note, though it is not
  // exactly the bucket width.
  assert.equal(T.timeGrid(base, base * 1000, Number(T.formatMs(base / 1000))).warn, '');
  assert.equal(T.timeGrid(base, base * 1000, 1).warn, 'Precision: asked for 1 ms, showing 1.795 ms, the finest buckets this file records.');
  // Rounded to whole buckets: the base in the same digits.
  assert.equal(T.timeGrid(4.57763671875, 3e5, 1).warn, 'Precision: asked for 1 ms, showing 0.9979 ms, a whole number of the recorded 0.004578 ms buckets.');
});

test('precisionNote: asked and shown in 4 significant digits, one reason, nothing when they read the same', () => {
  assert.equal(T.precisionNote(0.5, 1.7950439453125, 1.7950439453125, 'finer'), 'Precision: asked for 0.5 ms, showing 1.795 ms, the finest buckets this file records.');
  assert.equal(T.precisionNote(1, 1.00001, 0.5, 'rounded'), '');
  assert.equal(T.precisionNote(1, 2, 1, ''), '');
  assert.equal(T.precisionNote(1, 40, 1, 'limit', 1000), 'Precision: asked for 1 ms, showing 40 ms, the finest that keeps at most 1,000 points per run.');
});

test('formatMs: about 4 significant digits, no trailing zeros, no exponent', () => {
  const cases = [
    [1, '1'], [1.7950439453125, '1.795'], [3.590087890625, '3.59'], [0.0091552734375, '0.009155'], [0.001, '0.001'],
    [0.0001, '0.0001'], [1e-7, '0'], [0, '0'], [12.5, '12.5'], [999.96, '1,000'], [1234.5, '1,235'], [65536, '65,536'],
    [9.99996, '10'], [-2.5, '-2.5'], [0.99789428710937, '0.9979'], [NaN, '–'], [Infinity, '–'],
  ];
  for (const [v, want] of cases) assert.equal(T.formatMs(v), want, `formatMs(${v})`);
  assert.equal(T.formatMs(1.7950439453125, 2), '1.8');
  const rand = mulberry32(61);
  for (let i = 0; i < 500; i++) {
    const v = 10 ** (rand() * 10 - 5);
    const text = T.formatMs(v);
    assert.doesNotMatch(text, /e/);
    const n = Number(text.replace(/,/g, ''));
    if (v >= 1e-3) assert.ok(Math.abs(n - v) <= 5e-4 * v + 1e-12, `${v} -> ${text}`);
    assert.ok(text.replace(/[,.]/g, '').replace(/^0+/, '').length <= Math.max(4, String(Math.round(v)).length), `${v} -> ${text}`);
  }
});

test('indexGrid: budgeted buckets, a finer aligned window when zoomed in', () => {
  let g = T.indexGrid(1, 1e6, null);
  assert.equal(g.G, 250);
  assert.equal(g.edges.length - 1, T.INDEX_POINT_BUDGET);
  assert.equal(g.window, null);
  assert.equal(g.fineG, g.G);
  // Zoomed to 10,000 events: 3-event buckets in a window aligned to G.
  g = T.indexGrid(1, 1e6, { min: 100100, max: 110100 });
  assert.equal(g.fineG, 3);
  assert.deepEqual(g.window, { from: 100000, to: 110250 });
  // Zoomed out to more than half the span: no refinement.
  assert.equal(T.indexGrid(1, 1e6, { min: 0, max: 600000 }).window, null);
  // Already at the base bucket: nothing finer to show.
  assert.equal(T.indexGrid(1, 3000, { min: 10, max: 20 }).window, null);
  const rand = mulberry32(43);
  for (let round = 0; round < 200; round++) {
    const base = round % 2 ? 1 : 15.2587890625;
    const span = base * (1 + randInt(rand, 5e5));
    const budget = 10 + randInt(rand, 500);
    const zmin = rand() * span;
    const zoom = { min: zmin, max: zmin + rand() * (span - zmin) };
    const r = T.indexGrid(base, span, zoom, budget);
    assert.ok(r.G >= base && Number.isInteger(Math.round(r.G / base)));
    assert.ok(Math.ceil(span / r.G) <= budget || r.G === base);
    assert.ok(r.edges[0] === 0 && r.edges[r.edges.length - 1] >= span);
    for (let j = 1; j < r.edges.length; j++) assert.ok(r.edges[j] > r.edges[j - 1]);
    if (r.window) {
      assert.ok(r.fineG < r.G && r.fineG >= base);
      assert.ok(r.window.from <= zoom.min && r.window.to >= Math.min(zoom.max, span));
      assert.equal(r.window.from % r.G, 0);
      // The window gets about its own budget.
      const inWindow = r.edges.filter((x) => x >= r.window.from && x < r.window.to).length;
      assert.ok(inWindow <= budget + Math.ceil(2 * r.G / r.fineG), `${inWindow} buckets in the window`);
    }
  }
});

test('yRange always shows 0 with 5% headroom', () => {
  assert.deepEqual(T.yRange(null, 5), [0, 1]);
  assert.deepEqual(T.yRange(NaN, 5), [0, 1]);
  assert.deepEqual(T.yRange(100, 1000), [0, 1050]);
  assert.deepEqual(T.yRange(-1000, 1000), [-1100, 1100]);
  assert.deepEqual(T.yRange(0, 0), [0, 1024]);
});

// ---------------------------------------------------------------- drill-down

function randomLifetimes(rand, n, timeType, nSources) {
  const Time = timeType === 'f64' ? Float64Array : Uint32Array;
  const live = T.STILL_LIVE[timeType];
  const offset = timeType === 'f64' ? 2 ** 32 : 0; // f64 is what longer traces use
  const start = new Time(n);
  const end = new Time(n);
  const size = new Float64Array(n);
  const source = new Uint32Array(n);
  for (let i = 0; i < n; i++) {
    start[i] = offset + randInt(rand, 100);
    end[i] = rand() < 0.2 ? live : start[i] + randInt(rand, 40); // zero-length lifetimes too
    size[i] = 512 * (1 + randInt(rand, 2 ** 20));
    source[i] = randInt(rand, nSources + 2); // some past the source list
  }
  return {
    raw: { count: n, time_type: timeType, start_us: b64(start), end_us: b64(end), size: b64(size), source: b64(source) },
    plain: { start: Array.from(start), end: Array.from(end), size: Array.from(size), source: Array.from(source), live },
  };
}

// The obvious O(n) definition, one allocation at a time.
function bruteLive(plain, sources, tUs) {
  const bySource = new Map();
  let liveCount = 0;
  let liveBytes = 0;
  plain.start.forEach((s, i) => {
    const e = plain.end[i];
    if (!(s <= tUs && (e === plain.live || e > tUs))) return;
    const name = plain.source[i] < sources.length ? sources[plain.source[i]] : T.UNKNOWN_SOURCE;
    const row = bySource.get(name) || { bytes: 0, count: 0 };
    row.bytes += plain.size[i];
    row.count += 1;
    bySource.set(name, row);
    liveCount += 1;
    liveBytes += plain.size[i];
  });
  return { bySource, liveCount, liveBytes };
}

const sortedEntries = (map) => [...map.entries()].sort((a, b) => utf8Compare(a[0], b[0]));

test('liveAt equals a brute-force scan (u32 and f64 times)', () => {
  const rand = mulberry32(47);
  for (const timeType of ['u32', 'f64']) {
    for (let round = 0; round < 40; round++) {
      // Duplicate names: two source ids with the same name share a row.
      const sources = ['a@x.py:1', 'b@y.py:2', 'a@x.py:1', '<no frames>', '\u{1F600}@z.py:3'].slice(0, 1 + randInt(rand, 5));
      const { raw, plain } = randomLifetimes(rand, randInt(rand, 200), timeType, sources.length);
      const life = T.decodeLifetimes(raw, 'life');
      const offset = timeType === 'f64' ? 2 ** 32 : 0;
      // Exact starts and ends are the boundaries that matter: start <= t < end.
      const times = [offset - 1, offset, offset + 150, ...plain.start.slice(0, 5), ...plain.end.slice(0, 5).filter((e) => e !== plain.live)];
      for (const tUs of times) {
        const got = T.liveAt(life, sources, tUs);
        const want = bruteLive(plain, sources, tUs);
        assert.equal(got.liveCount, want.liveCount, `count at ${tUs}`);
        assert.equal(got.liveBytes, want.liveBytes, `bytes at ${tUs}`);
        assert.deepEqual(sortedEntries(got.bySource), sortedEntries(want.bySource), `sources at ${tUs}`);
      }
    }
  }
});

test('liveAtEvent equals a brute-force scan over event indices; null without them', () => {
  const rand = mulberry32(73);
  for (let round = 0; round < 40; round++) {
    const sources = ['a@x.py:1', 'b@y.py:2', 'a@x.py:1', '<no frames>'].slice(0, 1 + randInt(rand, 4));
    const n = randInt(rand, 200);
    // A replay: alloc i at event startEvent[i], its free later (or never).
    const startEvent = new Uint32Array(n);
    const endEvent = new Uint32Array(n).fill(T.STILL_LIVE_EVENT);
    const size = new Float64Array(n);
    const source = new Uint32Array(n);
    let e = 0;
    const open = [];
    for (let i = 0; i < n; i++) {
      startEvent[i] = e++;
      size[i] = 512 * (1 + randInt(rand, 1000));
      source[i] = randInt(rand, sources.length + 1);
      open.push(i);
      while (open.length && rand() < 0.4) endEvent[open.splice(randInt(rand, open.length), 1)[0]] = e++;
      if (rand() < 0.2) e++; // an event that is neither (free_requested, segment_alloc, ...)
    }
    const raw = {
      count: n, time_type: 'u32', start_us: b64(new Uint32Array(n)), end_us: b64(new Uint32Array(n)),
      size: b64(size), source: b64(source), start_event: b64(startEvent), end_event: b64(endEvent),
    };
    const life = T.decodeLifetimes(raw, 'life');
    const plain = { start: Array.from(startEvent), end: Array.from(endEvent), size: Array.from(size), source: Array.from(source), live: T.STILL_LIVE_EVENT };
    for (const at of [0, 1, randInt(rand, e + 1), e - 1, e, e + 5, ...plain.start.slice(0, 3), ...plain.end.slice(0, 3).filter((x) => x !== plain.live)]) {
      const got = T.liveAtEvent(life, sources, at);
      const want = bruteLive(plain, sources, at);
      assert.equal(got.liveCount, want.liveCount, `count after event ${at}`);
      assert.equal(got.liveBytes, want.liveBytes, `bytes after event ${at}`);
      assert.deepEqual(sortedEntries(got.bySource), sortedEntries(want.bySource), `sources after event ${at}`);
    }
    if (n > 0) {
      // Past the end: what is still live at the end.
      assert.equal(T.liveAtEvent(life, sources, e + 100).liveCount, plain.end.filter((x) => x === plain.live).length);
      // Without the columns: null, the page says why.
      assert.equal(T.liveAtEvent(T.decodeLifetimes({ ...raw, start_event: undefined, end_event: undefined }, 'life'), sources, 0), null);
    }
  }
  assert.equal(T.liveAtEvent(null, ['a'], 3).liveCount, 0);
});

test('liveAt of a run without lifetimes is empty', () => {
  const r = T.liveAt(null, ['a'], 5);
  assert.equal(r.liveCount, 0);
  assert.equal(r.liveBytes, 0);
  assert.equal(r.bySource.size, 0);
});

test('liveRows: the order of replay-to-time --json "sources"', () => {
  const rand = mulberry32(53);
  const mk = (entries) => ({ bySource: new Map(entries.map(([name, bytes]) => [name, { bytes, count: 1 }])) });
  // One run: bytes desc, then name in UTF-8 order (astral after U+FFFF).
  let rows = T.liveRows([mk([['b', 5], ['\u{1F600}', 7], ['\uffff', 7], ['a', 9]])]);
  assert.deepEqual(rows.map((r) => r.source), ['a', '\uffff', '\u{1F600}', 'b']);
  // Two runs: |B - A| desc, ties by name; a source in one run only has 0 in the other.
  rows = T.liveRows([mk([['x', 10], ['y', 3], ['w', 1]]), mk([['x', 4], ['y', 9], ['z', 6]])]);
  assert.deepEqual(rows.map((r) => r.source), ['x', 'y', 'z', 'w']);
  assert.deepEqual(rows[2].bytes, [0, 6]);
  assert.deepEqual(rows[2].count, [0, 1]);
  for (let round = 0; round < 100; round++) {
    const nRuns = 1 + randInt(rand, 4);
    const live = Array.from({ length: nRuns }, () => mk(Array.from({ length: randInt(rand, 8) }, () => [randomName(rand), 512 * randInt(rand, 6)])));
    rows = T.liveRows(live);
    const names = new Set(live.flatMap((l) => [...l.bySource.keys()]));
    assert.equal(rows.length, names.size);
    const key = (r) => (nRuns === 1 ? r.bytes[0] : nRuns === 2 ? Math.abs(r.bytes[1] - r.bytes[0]) : Math.max(...r.bytes));
    for (let i = 1; i < rows.length; i++) {
      const a = rows[i - 1];
      const b = rows[i];
      assert.ok(key(a) > key(b) || (key(a) === key(b) && utf8Compare(a.source, b.source) < 0), `${a.source} before ${b.source}`);
    }
    for (const r of rows) {
      r.bytes.forEach((bytes, k) => assert.equal(bytes, (live[k].bySource.get(r.source) || { bytes: 0 }).bytes));
    }
  }
});

test('nearestMoment picks the closest moment, the earlier of two equally close, -1 for none', () => {
  const moments = [{ t_s: 0 }, { t_s: 1 }, { t_s: 2.5 }];
  assert.equal(T.nearestMoment(moments, -3), 0);
  assert.equal(T.nearestMoment(moments, 0.4), 0);
  assert.equal(T.nearestMoment(moments, 0.5), 0);
  assert.equal(T.nearestMoment(moments, 0.6), 1);
  assert.equal(T.nearestMoment(moments, 1.75), 1);
  assert.equal(T.nearestMoment(moments, 99), 2);
  assert.equal(T.nearestMoment([], 1), -1);
  assert.equal(T.nearestMoment(undefined, 1), -1);
});

test('liveAtMoment snaps to the nearest moment and sums its rows by source name', () => {
  const m = {
    count: 3,
    timeUs: new Float64Array([0, 1000, 2000]),
    rowBegin: new Uint32Array([0, 0, 2, 3]),
    source: new Uint32Array([0, 1, 7]),
    bytes: new Float64Array([512, 1024, 4096]),
    allocCount: new Uint32Array([1, 2, 3]),
  };
  const sources = ['a@x.py:1', 'a@x.py:1'];  // two ids, one name: one row
  const at = T.liveAtMoment(m, sources, 1400);
  assert.equal(at.momentUs, 1000);
  assert.deepEqual([...at.bySource], [['a@x.py:1', { bytes: 1536, count: 3 }]]);
  assert.equal(at.liveBytes, 1536);
  assert.equal(at.liveCount, 3);
  assert.equal(T.liveAtMoment(m, sources, 1500).momentUs, 1000, 'a tie snaps to the earlier moment');
  assert.equal(T.liveAtMoment(m, sources, 1501).momentUs, 2000);
  assert.equal(T.liveAtMoment(m, sources, -5).momentUs, 0);
  assert.equal(T.liveAtMoment(m, sources, 0).liveCount, 0, 'an empty moment');
  assert.deepEqual([...T.liveAtMoment(m, sources, 9e9).bySource.keys()], [T.UNKNOWN_SOURCE], 'an id past the sources');
});

test('unlistedAt: rows from before the trace less the frees so far, by time or by event, summing to the line', () => {
  const f64 = (values) => b64(new Float64Array(values));
  const u32 = (values) => b64(new Uint32Array(values));
  const raw = {
    rows: ['load@train.py:3', 'freed at step@optim.py:9 (allocated before the trace)', 'address reused without a free'],
    start_bytes: f64([4096, 2048, 0]),
    start_count: f64([2, 2, 0]),
    count: 3,
    change_us: f64([100, 250, 250]),
    change_event: u32([4, 9, 10]),
    change_row: u32([1, 2, 1]),
    change_bytes: f64([-1024, 512, -1024]),
    change_count: f64([-1, 1, -1]),
  };
  const u = T.decodeUnlisted(raw, 'unlisted');
  const at = (x, byEvent) => Object.fromEntries([...T.unlistedAt(u, x, byEvent).bySource].map(([n, v]) => [n, v.bytes]));
  assert.deepEqual(at(0), { 'load@train.py:3': 4096, 'freed at step@optim.py:9 (allocated before the trace)': 2048 });
  assert.deepEqual(at(100), { 'load@train.py:3': 4096, 'freed at step@optim.py:9 (allocated before the trace)': 1024 }, 'a change at the time counts');
  assert.deepEqual(at(250), { 'load@train.py:3': 4096, 'address reused without a free': 512 }, 'a row that holds nothing is left out');
  assert.equal(T.unlistedAt(u, 250).bytes, 4608);
  assert.deepEqual(at(9, true), { 'load@train.py:3': 4096, 'freed at step@optim.py:9 (allocated before the trace)': 1024, 'address reused without a free': 512 });
  assert.equal(T.unlistedAt(null, 5).bytes, 0);
  assert.equal(T.decodeUnlisted(undefined, 'u'), null, 'older pages have none');
  // The lifetimes and the unlisted rows together are the line: a random
  // trace with memory from before it, checked against a replay.
  const rand = mulberry32(5);
  const before = [[0, 3000], [1, 5000], [0, 700], [1, 900]];  // [row, bytes] live at the start
  const changes = [];
  let line = before.reduce((a, [, b]) => a + b, 0);
  const lineAt = [[0, line]];
  for (let t = 10, k = 0; k < before.length; k++, t += 10 + randInt(rand, 50)) {
    changes.push([t, before[k][0], -before[k][1]]);
    line -= before[k][1];
    lineAt.push([t, line]);
  }
  const v = T.decodeUnlisted({
    rows: ['a', 'b'], start_bytes: f64([3700, 5900]), start_count: f64([2, 2]), count: changes.length,
    change_us: f64(changes.map((c) => c[0])), change_event: u32(changes.map((_, k) => k)),
    change_row: u32(changes.map((c) => c[1])), change_bytes: f64(changes.map((c) => c[2])), change_count: f64(changes.map(() => -1)),
  }, 'v');
  for (const [t, want] of lineAt) assert.equal(T.unlistedAt(v, t).bytes, want, `at ${t}`);
  assert.throws(() => T.decodeUnlisted({ ...raw, change_row: u32([1, 2, 3]) }, 'u'), /row 3 of 3/);
});

test('stackLayout: the chosen number of sources, layers summing as before, before the trace at the bottom, steadiest next', () => {
  const f64 = (values) => Buffer.from(new Float64Array(values).buffer).toString('base64');
  // Four buckets. "params" stays (steadiness 1), "acts" rises and falls,
  // "tmp" spikes once; the parts are the sources ranked after the top ones,
  // all that "other sources" holds here.
  const raw = {
    source: {
      layers: ['before the trace', 'acts', 'params', 'other sources'],
      time: { per_bucket: 1, count: 4, layers: [f64([5, 5, 5, 5]), f64([0, 4, 8, 2]), f64([6, 6, 6, 6]), f64([1, 1, 1, 9])] },
      index: { per_bucket: 1, count: 4, layers: [f64([5, 5, 5, 5]), f64([0, 4, 8, 2]), f64([6, 6, 6, 6]), f64([1, 1, 1, 9])] },
      other_parts: {
        layers: ['tmp', 'cache'],
        time: { per_bucket: 1, count: 4, layers: [f64([0, 0, 0, 8]), f64([1, 1, 1, 1])] },
        index: { per_bucket: 1, count: 4, layers: [f64([0, 0, 0, 8]), f64([1, 1, 1, 1])] },
      },
    },
  };
  const stack = T.decodeStacks(raw, 'stacks').source;
  const sums = (layout) => [0, 1, 2, 3].map((b) => layout.layers.reduce((a, l) => a + l[b], 0));
  const whole = [12, 16, 20, 22];
  const two = T.stackLayout(stack, 'time', 2);
  // Steadiness: params 1, acts 3.5 / 8, other sources (its parts) 3 / 9.
  assert.deepEqual(two.names, ['before the trace', 'params', 'acts', 'other sources']);
  assert.deepEqual(sums(two), whole);
  assert.deepEqual(two.rank, [-1, 1, 0, -1], 'a source keeps its rank in the data (its colour)');
  assert.equal(two.available, 4);
  const all = T.stackLayout(stack, 'time', 4);
  assert.deepEqual(all.names, ['before the trace', 'params', 'cache', 'acts', 'tmp'], 'other sources is gone once its parts are all out');
  assert.deepEqual(sums(all), whole);
  const one = T.stackLayout(stack, 'index', 1);
  assert.deepEqual(one.names.filter((n) => n !== 'before the trace' && n !== 'other sources'), ['acts']);
  assert.deepEqual(Array.from(one.layers[one.names.indexOf('other sources')]), [7, 7, 7, 15], 'params folded into other sources');
  assert.deepEqual(sums(one), whole);
  assert.equal(T.stackLayout(stack, 'time', 99).shown, 4);
  assert.equal(T.stackLayout(stack, 'time', 0).names.length, 2);
  for (const layout of [one, two, all]) {
    const s = layout.steadiness.slice(1);
    assert.ok(s.every((v, k) => k === 0 || v <= s[k - 1]), `steadiest first: ${layout.names} ${s}`);
  }
  assert.equal(T.steadiness([2, 2, 2]), 1);
  assert.equal(T.steadiness([0, 0]), 0);
  assert.equal(T.steadiness([0, 4, 0, 0]), 0.25);
  assert.equal(T.stackLayout({ names: [], time: null, index: null }, 'time'), null);
  assert.throws(() => T.decodeStacks({ source: { ...raw.source, other_parts: { ...raw.source.other_parts, time: { per_bucket: 1, count: 3, layers: [] } } } }, 's'), /other_parts/);
});

test('allocatorMomentAt: the state at a time where every change is held, else the nearest; drawn segments rebuilt from changes', () => {
  const segments = [{ address: '0x1' }, { address: '0x2' }, { address: '0x2', v: 2 }, { address: '0x3' }];
  const moments = [
    { t_s: 0, drawn_count: 2, drawn: [0, 0, 1, 1] },
    { t_s: 0.5, drawn_count: 2, drawn: [1, 2] },
    { t_s: 0.9, drawn_count: 3, drawn: [2, 3] },
    { t_s: 1.0, drawn_count: 1, drawn: [] },
  ];
  const every = { every_change: true, segments, moments };
  const ids = (at) => at.segments.map((g) => segments.indexOf(g));
  assert.equal(T.allocatorMomentAt(every, 0.89).index, 1, 'the last change at or before the time, not the nearest');
  assert.deepEqual(ids(T.allocatorMomentAt(every, 0.89)), [0, 2]);
  assert.deepEqual(ids(T.allocatorMomentAt(every, 0.9)), [0, 2, 3]);
  assert.deepEqual(ids(T.allocatorMomentAt(every, 5)), [0]);
  assert.equal(T.allocatorMomentAt(every, -1).index, 0);
  assert.equal(T.allocatorMomentAt(every, 0.2).exact, true);
  const sparse = { every_change: false, segments, moments };
  assert.equal(T.allocatorMomentAt(sparse, 0.89).index, 2, 'the nearest');
  assert.equal(T.allocatorMomentAt(sparse, 0.89).exact, false);
  assert.equal(T.allocatorMomentAt({ moments: [] }, 1), null);
  assert.throws(() => T.allocatorMomentAt({ segments, moments: [{ t_s: 0, drawn_count: 1, drawn: [0, 9] }] }, 0), /segment 9 of 4/);
});

test('segmentBlocks decodes triples and marks the first free block of the largest size only', () => {
  const blocks = T.segmentBlocks([0, 512, 0, 512, 1024, 2, 1536, 512, 1, 2048, 1024, 2], 1024);
  assert.deepEqual(blocks.map((b) => [b.offset, b.size, b.state, b.largest]),
    [[0, 512, 0, false], [512, 1024, 2, true], [1536, 512, 1, false], [2048, 1024, 2, false]]);
  assert.equal(T.segmentBlocks([0, 1024, 0], 1024)[0].largest, false, 'an allocated block is never the largest free one');
  assert.deepEqual(T.segmentBlocks([0, 1, 2, 3], 0).length, 1, 'a trailing partial triple is ignored');
});

test('the module is self-contained: one frozen object, defines no page global under node', () => {
  assert.ok(Object.isFrozen(T));
  assert.equal(globalThis.MemsnapTransforms, undefined);
});

test('stackAllocations puts each allocation on the band and those before it, and the top is the line', () => {
  const random = mulberry32(17);
  const width = 40;
  const allocations = [];
  for (let k = 0; k < 60; k++) {
    const first = Math.floor(random() * width);
    const last = Math.min(width - 1, first + Math.floor(random() * 12));
    allocations.push({ entry: k, size: 512 * (1 + Math.floor(random() * 50)), first_column: first, last_column: last });
  }
  const band = Array.from({ length: width }, () => Math.floor(random() * 1e6));
  const high = band.map((b, c) => b + allocations.reduce((sum, a) => sum + (a.first_column <= c && c <= a.last_column ? a.size : 0), 0));
  const layout = { band, allocations, high };
  const stacked = T.stackAllocations(layout);
  assert.deepEqual(Array.from(stacked.top), high);
  for (let c = 0; c < width; c++) {
    let running = band[c];
    allocations.forEach((a, k) => {
      if (c < a.first_column || c > a.last_column) return;
      assert.equal(stacked.bands[k].bottoms[c - a.first_column], running);
      // Its own bytes hit it; the band below and the top above do not.
      assert.equal(T.allocationAtPoint(layout, stacked, c, running), k);
      assert.equal(T.allocationAtPoint(layout, stacked, c, running + a.size - 1), k);
      running += a.size;
    });
    assert.equal(T.allocationAtPoint(layout, stacked, c, band[c] - 1), -1);
    assert.equal(T.allocationAtPoint(layout, stacked, c, high[c]), -1);
  }
});

test('sliceAllocations cuts the embedded layout to the columns a window touches', () => {
  const embedded = {
    sources: ['a', 'b'],
    items: { entry: [3, 9, 20], size: [100, 50, 25], end_entry: [15, -1, 30], time_s: [0.1, 0.2, 0.3], end_time_s: [0.5, null, 0.6],
      source: [0, 1, 0], category: ['activation', 'parameter', 'temporary'], stack: [0, -1, 1] },
    event: { from: 0, to: 40, high: [1, 2, 3, 4, 5, 6, 7, 8], band: [0, 1, 1, 1, 1, 1, 1, 1], first: [0, 2, 6], last: [3, 7, -1] },
    time: null,
  };
  assert.equal(T.sliceAllocations(embedded, 'time', 0, 1), null);
  const cut = T.sliceAllocations(embedded, 'event', 12, 27); // columns of 5 events: 2..5
  assert.deepEqual(cut.high, [3, 4, 5, 6]);
  assert.equal(cut.colFrom, 10);
  assert.equal(cut.colStep, 5);
  assert.deepEqual(cut.allocations.map((a) => [a.entry, a.first_column, a.last_column, a.end_entry]), [[3, 0, 1, 15], [9, 0, 3, null]]);
  const whole = T.sliceAllocations(embedded, 'event', 0, 40);
  assert.equal(whole.band.length, 8);
  assert.deepEqual(whole.allocations.map((a) => a.entry), [3, 9]); // entry 20 is not visible on this axis
  // Three pixels for eight columns: groups of three, each taken where the line is highest.
  const merged = T.sliceAllocations(embedded, 'event', 0, 40, 3);
  assert.deepEqual(merged.high, [3, 6, 8]);
  assert.deepEqual(merged.band, [1, 1, 1]);
  assert.equal(merged.colStep, 15);
  assert.deepEqual(merged.allocations.map((a) => [a.entry, a.first_column, a.last_column]), [[3, 0, 0], [9, 0, 2]]);
});
