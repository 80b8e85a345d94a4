/* memsnap plot page: the pure part.
 *
 * Formatting, decoding of the embedded columns, regrouping into display
 * buckets and the drill-down's live-at scan: no DOM, no globals read, no
 * dependencies. Loaded as a classic <script> before web/app.js, it defines the
 * one global `MemsnapTransforms`; under node (`require`) it is the module's
 * export, for tests/web/transforms.test.js.
 */
'use strict';

(() => {
  const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];
  // Event-index view: about this many buckets (each drawn as its min and max) per run.
  const INDEX_POINT_BUDGET = 4000;
  // Wall-clock view: never more buckets than this, whatever the precision asked for.
  const TIME_POINT_LIMIT = 50000;
  const EPS = 1e-9;
  // end_us of an allocation still live at the end of the trace, per time_type.
  const STILL_LIVE = { u32: 0xffffffff, f64: -1 };
  // end_event of an allocation still live at the end of the trace.
  const STILL_LIVE_EVENT = 0xffffffff;
  const UNKNOWN_SOURCE = '<unknown source>';

  // ---------------------------------------------------------------- formatting

  // value.toFixed(2), except that an exact tie goes to the even digit: the C++
  // side prints with fmt's "{:.2f}", which rounds 1.125 to "1.12" where
  // toFixed gives "1.13". Ties are exact multiples of 1/8 ending in .125/.625.
  function fixed2(value) {
    const eighths = value * 8;
    if (Number.isInteger(eighths) && eighths % 2 !== 0) {
      const lo = Math.floor(value * 100);
      return ((lo % 2 === 0 ? lo : lo + 1) / 100).toFixed(2);
    }
    return value.toFixed(2);
  }

  // Same output as the C++ format_bytes: "N B" below 1 KiB, else 2 decimals, 1024-based.
  function formatBytes(n) {
    if (!Number.isFinite(n)) return '–';
    if (n < 1024) return `${Math.round(n)} B`;
    let value = n;
    let unit = 0;
    while (value >= 1024 && unit + 1 < UNITS.length) {
      value /= 1024;
      unit += 1;
    }
    return `${fixed2(value)} ${UNITS[unit]}`;
  }

  function formatSignedBytes(n) {
    if (!Number.isFinite(n)) return '–';
    if (n === 0) return '0 B';
    return (n < 0 ? '-' : '+') + formatBytes(Math.abs(n));
  }

  function formatCount(n) {
    if (!Number.isFinite(n)) return '–';
    return Math.round(n).toLocaleString('en-US');
  }

  function formatSignedCount(n) {
    if (!Number.isFinite(n)) return '–';
    if (n === 0) return '0';
    return (n < 0 ? '-' : '+') + formatCount(Math.abs(n));
  }

  // Axis labels: shortest form, up to 2 decimals ("1.5 GiB", "512 MiB").
  function formatAxisBytes(v) {
    if (v === 0) return '0';
    const sign = v < 0 ? '-' : '';
    let value = Math.abs(v);
    let unit = 0;
    while (value >= 1024 && unit + 1 < UNITS.length) {
      value /= 1024;
      unit += 1;
    }
    return `${sign}${Number(value.toFixed(2))} ${UNITS[unit]}`;
  }

  function formatSeconds(s) {
    if (!Number.isFinite(s)) return '–';
    return `${s.toFixed(6)} s`;
  }

  // Decimals that show every multiple of incr exactly (at most 6). uPlot's tick
  // steps include 2.5 * 10^n: 0.25 needs 2 decimals, not the 1 of 0.2 and 0.5.
  function decimalsFor(incr) {
    if (!(incr > 0)) return 0;
    for (let d = 0; d < 6; d++) {
      const scaled = incr * 10 ** d;
      if (Math.abs(scaled - Math.round(scaled)) <= 1e-6 * scaled) return d;
    }
    return 6;
  }

  function formatIndexTick(v, incr) {
    const a = Math.abs(v);
    if (a >= 1e6 && incr >= 1e5) return `${Number((v / 1e6).toFixed(decimalsFor(incr / 1e6)))}M`;
    return formatCount(v);
  }

  // A duration in ms for prose: about `digits` significant digits, trailing
  // zeros dropped, never an exponent ("1.795", "3.59", "0.009155", "1,024").
  // Whole numbers of 10^digits and more keep all their integer digits.
  function formatMs(ms, digits = 4) {
    if (!Number.isFinite(ms)) return '–';
    if (ms === 0) return '0';
    const a = Math.abs(ms);
    const decimals = Math.min(6, Math.max(0, digits - 1 - Math.floor(Math.log10(a))));
    let text = a.toFixed(decimals);
    if (text.includes('.')) text = text.replace(/0+$/, '').replace(/\.$/, '');
    const [whole, frac] = text.split('.');
    text = whole.replace(/\B(?=(\d{3})+(?!\d))/g, ',') + (frac ? `.${frac}` : '');
    return text === '0' ? '0' : (ms < 0 ? '-' : '') + text;
  }

  // A trace's duration for the cards: seconds with 3 decimals from 1 s on,
  // else milliseconds (3 significant digits), so a short trace does not read "0.000 s".
  function formatDuration(seconds) {
    if (!Number.isFinite(seconds)) return '–';
    return Math.abs(seconds) >= 1 ? `${seconds.toFixed(3)} s` : `${formatMs(seconds * 1000, 3)} ms`;
  }

  // Tick steps (x axis units) uPlot may choose from. Event indices are whole
  // numbers, so no step below 1; wall-clock seconds stop at 1 µs, the
  // resolution of the data (a finer step could only repeat labels).
  function tickIncrs(kind) {
    const out = [];
    if (kind === 'index') {
      for (let e = 0; e <= 15; e++) {
        const p = 10 ** e;
        out.push(p, 2 * p);
        if (e >= 1) out.push(2.5 * p);
        out.push(5 * p);
      }
    } else {
      for (let e = -6; e <= 9; e++) {
        const p = 10 ** e;
        out.push(Number((p).toPrecision(1)), Number((2 * p).toPrecision(1)));
        if (e >= -5) out.push(Number((2.5 * p).toPrecision(2)));
        out.push(Number((5 * p).toPrecision(1)));
      }
    }
    return out;
  }

  // Labels of the x ticks at `splits` (step `incr`): no label is repeated and,
  // for event indices, only whole numbers get one. Time: as many decimals as
  // the step needs (more if two labels would still read the same, at most 6);
  // a label that would still repeat, or a split that is not a whole event,
  // stays empty.
  function formatTicks(splits, incr, kind) {
    const isWhole = (v) => Math.abs(v - Math.round(v)) <= 1e-9 * Math.max(1, Math.abs(v));
    let labels;
    if (kind === 'index') {
      labels = splits.map((v) => (v == null || !Number.isFinite(v) || !isWhole(v) ? '' : formatIndexTick(Math.round(v), Math.max(1, incr))));
    } else {
      // A split that d decimals cannot show exactly gets no label rather than a wrong one.
      const exact = (v, d) => Math.abs(v * 10 ** d - Math.round(v * 10 ** d)) <= 1e-6 * Math.max(1, Math.abs(v * 10 ** d));
      const fmt = (d) => splits.map((v) => (v == null || !Number.isFinite(v) || !exact(v, d) ? '' : (Math.abs(v) < 5e-7 ? 0 : v).toFixed(d)));
      let d = decimalsFor(incr);
      while (d < 6 && splits.some((v) => v != null && Number.isFinite(v) && !exact(v, d))) d++;
      labels = fmt(d);
      const repeats = (ls) => new Set(ls.filter((l) => l !== '')).size < ls.filter((l) => l !== '').length;
      while (repeats(labels) && d < 6) labels = fmt(++d);
    }
    const seen = new Set();
    return labels.map((l) => {
      if (l === '' || seen.has(l)) return '';
      seen.add(l);
      return l;
    });
  }

  // Short names for run labels that share a long common prefix or suffix
  // (default labels are file names, e.g. `team_proj__medium_128_training.pickle`
  // and `..._512_...`): the common prefix and suffix are dropped at token
  // boundaries (runs of _ - . / \ or spaces), an elided end is marked "…",
  // and at least `minChars` characters of the label stay (whole tokens are
  // added back from the left, then the right, alternately). Labels of at most
  // `shortLength` characters are left alone, and so is a single label. Never
  // returns two equal names: where shortening would, the full labels are
  // kept, and equal labels get " (2)", " (3)", … appended.
  const NAME_DELIMS = /([_\-./\\\s]+)/;
  const isDelim = (tok) => /^[_\-./\\\s]+$/.test(tok);
  const trimDelims = (s) => s.replace(/^[_\-./\\\s]+|[_\-./\\\s]+$/g, '');

  function distinguishingNames(labels, { minChars = 8, shortLength = 20 } = {}) {
    const names = labels.map((l) => String(l));
    let out = names.slice();
    if (names.length >= 2 && names.some((n) => n.length > shortLength)) {
      const toks = names.map((n) => n.split(NAME_DELIMS).filter((t) => t !== ''));
      const first = toks[0];
      const minLen = Math.min(...toks.map((t) => t.length));
      let p = 0;
      while (p < minLen && toks.every((t) => t[p] === first[p])) p++;
      let s = 0;
      while (p + s < minLen && toks.every((t) => t[t.length - 1 - s] === first[first.length - 1 - s])) s++;
      const middle = (t) => trimDelims(t.slice(p, t.length - s).join(''));
      // Context: add whole tokens back until every name has minChars.
      let left = true;
      while ((p > 0 || s > 0) && Math.min(...toks.map((t) => middle(t).length)) < minChars) {
        if ((left && p > 0) || s === 0) {
          do p--; while (p > 0 && isDelim(first[p]));
        } else {
          do s--; while (s > 0 && isDelim(first[first.length - 1 - s]));
        }
        left = !left;
      }
      out = toks.map((t, i) => {
        if (names[i].length <= shortLength) return names[i];
        const head = trimDelims(t.slice(0, p).join('')) !== '';
        const tail = trimDelims(t.slice(t.length - s).join('')) !== '';
        const short = `${head ? '…' : ''}${middle(t)}${tail ? '…' : ''}`;
        return middle(t) !== '' && short.length < names[i].length ? short : names[i];
      });
      if (new Set(out).size < out.length) out = names.slice();
    }
    const used = new Map();
    return out.map((n) => {
      const k = (used.get(n) || 0) + 1;
      used.set(n, k);
      if (k === 1) return n;
      let alt = `${n} (${k})`;
      while (out.includes(alt) || used.has(alt)) alt += "'";
      used.set(alt, 1);
      return alt;
    });
  }

  // What the C++ printable() (src/report/format.h) shows of a name from the
  // file: control characters (C0, DEL, C1), bidirectional marks, embeddings,
  // overrides and isolates, U+2028/U+2029 and the tag characters as visible
  // escapes (\x1b, \n, \u202e, \U000e0041), so that a file named with
  // U+202E reads as it is spelled, not reversed. Everything else stays.
  const SPOOFING = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]|\udb40[\udc00-\udc7f]/g;
  const NAMED_CONTROLS = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };
  function printable(s) {
    return String(s).replace(SPOOFING, (c) => {
      if (NAMED_CONTROLS[c]) return NAMED_CONTROLS[c];
      const code = c.codePointAt(0);
      const hex = (width) => code.toString(16).padStart(width, '0');
      if (code < 0x20 || code === 0x7f) return `\\x${hex(2)}`;
      return code <= 0xffff ? `\\u${hex(4)}` : `\\U${hex(8)}`;
    });
  }

  function esc(s) {
    return String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
  }

  function withAlpha(hex, alpha) {
    const n = parseInt(hex.slice(1), 16);
    return `rgba(${(n >> 16) & 255}, ${(n >> 8) & 255}, ${n & 255}, ${alpha})`;
  }

  // Order of std::string::compare on UTF-8 bytes, i.e. code point order. JS `<`
  // compares UTF-16 units, which differs only for astral characters (surrogates)
  // against U+E000..U+FFFF.
  function compareNames(a, b) {
    if (a === b) return 0;
    const n = Math.min(a.length, b.length);
    for (let i = 0; i < n; i++) {
      const x = a.charCodeAt(i);
      const y = b.charCodeAt(i);
      if (x !== y) {
        const xs = x >= 0xd800 && x <= 0xdfff;
        const ys = y >= 0xd800 && y <= 0xdfff;
        if (xs !== ys) return xs ? 1 : -1;
        return x < y ? -1 : 1;
      }
    }
    return a.length - b.length;
  }

  // ---------------------------------------------------------------- decoding

  const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
  const WIDTH = { f64: 8, u32: 4 };

  function decodeBase64(b64) {
    if (typeof b64 !== 'string' || b64.length === 0) return new Uint8Array(0);
    const bin = atob(b64);
    const n = bin.length;
    const out = new Uint8Array(n);
    for (let i = 0; i < n; i++) out[i] = bin.charCodeAt(i);
    return out;
  }

  // `littleEndianHost` only exists so that the tests can take the DataView path.
  function column(b64, count, kind, what, littleEndianHost = LITTLE_ENDIAN) {
    const width = WIDTH[kind];
    if (!width) throw new Error(`${what}: unknown column type ${kind}`);
    const bytes = decodeBase64(b64);
    if (bytes.length !== count * width) {
      throw new Error(`${what}: expected ${count} ${kind} values (${count * width} bytes), got ${bytes.length} bytes`);
    }
    if (littleEndianHost) {
      return kind === 'f64' ? new Float64Array(bytes.buffer, 0, count) : new Uint32Array(bytes.buffer, 0, count);
    }
    const view = new DataView(bytes.buffer);
    const out = kind === 'f64' ? new Float64Array(count) : new Uint32Array(count);
    for (let i = 0; i < count; i++) out[i] = kind === 'f64' ? view.getFloat64(i * 8, true) : view.getUint32(i * 4, true);
    return out;
  }

  function count(obj) {
    const n = obj && Number(obj.count);
    return Number.isFinite(n) && n > 0 ? n : 0;
  }

  function decodeBuckets(raw, widthKey, what) {
    const n = count(raw);
    if (n === 0) return null;
    const width = Number(raw[widthKey]);
    if (!(width > 0)) throw new Error(`${what}: ${widthKey} must be positive`);
    return {
      width,
      count: n,
      min: column(raw.min, n, 'f64', `${what}.min`),
      max: column(raw.max, n, 'f64', `${what}.max`),
    };
  }

  function decodeLifetimes(raw, what) {
    const n = count(raw);
    if (n === 0) return null;
    const timeKind = raw.time_type === 'f64' ? 'f64' : 'u32';
    return {
      count: n,
      f64: timeKind === 'f64',
      start: column(raw.start_us, n, timeKind, `${what}.start_us`),
      end: column(raw.end_us, n, timeKind, `${what}.end_us`),
      // u32 when every size fits (memsnap writes size_type); f64 otherwise and in older pages.
      size: column(raw.size, n, raw.size_type === 'u32' ? 'u32' : 'f64', `${what}.size`),
      source: column(raw.source, n, 'u32', `${what}.source`),
      // Optional (not in memsnap 0.1.0): event index of each alloc and of the
      // event that ended it, for the event-index drill-down.
      ...(hasEventColumns(raw)
        ? {
          startEvent: column(raw.start_event, n, 'u32', `${what}.start_event`),
          endEvent: column(raw.end_event, n, 'u32', `${what}.end_event`),
        }
        : {}),
    };
  }

  // Live memory by source at moments (`moments` in the data, for runs with
  // more allocations than plot's --max-lifetimes): { count, timeUs, rowBegin,
  // source, bytes, allocCount }, moment k's rows [rowBegin[k], rowBegin[k+1]).
  function decodeMoments(raw, what) {
    const n = count(raw);
    if (n === 0) return null;
    const rows = Number(raw.rows) || 0;
    const m = {
      count: n,
      timeUs: column(raw.time_us, n, 'f64', `${what}.time_us`),
      rowBegin: column(raw.row_begin, n + 1, 'u32', `${what}.row_begin`),
      source: column(raw.source, rows, 'u32', `${what}.source`),
      bytes: column(raw.bytes, rows, 'f64', `${what}.bytes`),
      allocCount: column(raw.alloc_count, rows, 'u32', `${what}.alloc_count`),
    };
    if (m.rowBegin[n] !== rows) throw new Error(`${what}: row_begin does not end at rows`);
    return m;
  }

  // The live moment nearest to tUs (the earlier one on a tie).
  function nearestLiveMoment(m, tUs) {
    let lo = 0;
    let hi = m.count - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (m.timeUs[mid] < tUs) lo = mid + 1;
      else hi = mid;
    }
    if (lo > 0 && tUs - m.timeUs[lo - 1] <= m.timeUs[lo] - tUs) lo -= 1;
    return lo;
  }

  // What liveAt gives, at the moment nearest to tUs, plus that moment's time.
  function liveAtMoment(m, sources, tUs) {
    const result = { bySource: new Map(), liveCount: 0, liveBytes: 0, momentUs: null };
    if (!m) return result;
    const k = nearestLiveMoment(m, tUs);
    result.momentUs = m.timeUs[k];
    for (let row = m.rowBegin[k]; row < m.rowBegin[k + 1]; row++) {
      const s = m.source[row];
      const name = s < sources.length ? sources[s] : UNKNOWN_SOURCE;
      const have = result.bySource.get(name);
      if (have) {
        have.bytes += m.bytes[row];
        have.count += m.allocCount[row];
      } else result.bySource.set(name, { bytes: m.bytes[row], count: m.allocCount[row] });
      result.liveCount += m.allocCount[row];
      result.liveBytes += m.bytes[row];
    }
    return result;
  }

  // What the line counts that no lifetime lists (`unlisted` in the data;
  // absent from older pages): memory from before the trace by source, which
  // its frees take out, and allocations at reused addresses, which the replay
  // keeps counting. { names, startBytes, startCount, count, us, event, row,
  // bytes, allocCount }: row r starts at startBytes[r], change k adds
  // bytes[k] (allocCount[k] allocations) to row[k] at us[k] / after event[k].
  function decodeUnlisted(raw, what) {
    if (!raw || typeof raw !== 'object' || !Array.isArray(raw.rows)) return null;
    const names = raw.rows.map(String);
    const n = count(raw);
    const u = {
      names,
      startBytes: column(raw.start_bytes, names.length, 'f64', `${what}.start_bytes`),
      startCount: column(raw.start_count, names.length, 'f64', `${what}.start_count`),
      count: n,
      us: column(raw.change_us, n, 'f64', `${what}.change_us`),
      event: column(raw.change_event, n, 'u32', `${what}.change_event`),
      row: column(raw.change_row, n, 'u32', `${what}.change_row`),
      bytes: column(raw.change_bytes, n, 'f64', `${what}.change_bytes`),
      allocCount: column(raw.change_count, n, 'f64', `${what}.change_count`),
    };
    for (let k = 0; k < n; k++) if (u.row[k] >= names.length) throw new Error(`${what}: change ${k} names row ${u.row[k]} of ${names.length}`);
    return u;
  }

  // The unlisted rows at µs offset x (byEvent false: every change at or
  // before x applied, as replay-to-time --time applies the entries up to
  // then) or after event x (byEvent true): { bySource: Map name -> { bytes,
  // count } (rows holding nothing left out), bytes: their sum }. A linear
  // scan: changes are few next to the lifetimes.
  function unlistedAt(u, x, byEvent = false) {
    const result = { bySource: new Map(), bytes: 0 };
    if (!u) return result;
    const bytes = Float64Array.from(u.startBytes);
    const counts = Float64Array.from(u.startCount);
    const at = byEvent ? u.event : u.us;
    for (let k = 0; k < u.count; k++) {
      if (at[k] > x) continue;
      bytes[u.row[k]] += u.bytes[k];
      counts[u.row[k]] += u.allocCount[k];
    }
    u.names.forEach((name, r) => {
      if (bytes[r] === 0 && counts[r] === 0) return;
      const have = result.bySource.get(name);
      if (have) {
        have.bytes += bytes[r];
        have.count += counts[r];
      } else result.bySource.set(name, { bytes: bytes[r], count: counts[r] });
      result.bytes += bytes[r];
    });
    return result;
  }

  // The stacked views (`stacks` in the data; absent from older pages):
  // { category, source }, each { names, time, index } where a view is null
  // or { per, count, layers: [Float64Array per layer] } and per is the number
  // of the run's buckets one stack bucket spans.
  function decodeStacks(raw, what) {
    if (!raw || typeof raw !== 'object') return null;
    const out = {};
    for (const mode of ['category', 'source']) {
      const m = raw[mode];
      if (!m) continue;
      if (!Array.isArray(m.layers)) throw new Error(`${what}.${mode}.layers must be a list of names`);
      const names = m.layers.map(String);
      const view = (v, where) => {
        const n = count(v);
        if (n === 0) return null;
        const per = Number(v.per_bucket);
        if (!(Number.isInteger(per) && per > 0)) throw new Error(`${where}.per_bucket must be a positive whole number`);
        if (!Array.isArray(v.layers) || v.layers.length !== names.length) {
          throw new Error(`${where}: ${Array.isArray(v.layers) ? v.layers.length : 0} layers for ${names.length} names`);
        }
        return { per, count: n, layers: v.layers.map((b, k) => column(b, n, 'f64', `${where}.layers[${k}]`)) };
      };
      out[mode] = { names, time: view(m.time, `${what}.${mode}.time`), index: view(m.index, `${what}.${mode}.index`), parts: null };
      // Optional: the sources ranked after the top ones, each a part of
      // "other sources" in the same buckets (absent from older pages).
      const p = m.other_parts;
      if (p && Array.isArray(p.layers) && p.layers.length > 0) {
        const partNames = p.layers.map(String);
        const partView = (v, main, where) => {
          if (!main) return null;
          if (!v || count(v) !== main.count || Number(v.per_bucket) !== main.per || !Array.isArray(v.layers) || v.layers.length !== partNames.length) {
            throw new Error(`${where}: other_parts must have one column of ${main.count} buckets per part`);
          }
          return { per: main.per, count: main.count, layers: v.layers.map((b, k) => column(b, main.count, 'f64', `${where}.layers[${k}]`)) };
        };
        out[mode].parts = {
          names: partNames,
          time: partView(p.time, out[mode].time, `${what}.${mode}.other_parts.time`),
          index: partView(p.index, out[mode].index, `${what}.${mode}.other_parts.index`),
        };
      }
    }
    return Object.keys(out).length ? out : null;
  }

  // Layers of the stacked views that are not one source (or category).
  const BEFORE_TRACE_LAYER = 'before the trace';
  const OTHER_SOURCES_LAYER = 'other sources';
  const REUSED_LAYER = 'address reused without a free';

  // How long-lived a layer is: mean / max of its bytes over the buckets, 1
  // for memory that stays (parameters, optimizer state) and near 0 for what
  // spikes; 0 for a layer that never holds anything.
  function steadiness(values) {
    let max = 0;
    let sum = 0;
    for (const v of values) {
      if (v > max) max = v;
      sum += v;
    }
    return max > 0 && values.length > 0 ? sum / values.length / max : 0;
  }

  // ---- The allocation view (memsnap serve's GET /api/layout): per column,
  // the band of everything not drawn lowest, then the drawn allocations by
  // entry, each on top of those before it that are live in that column.
  // Returns one { first, last, bottoms: Float64Array } per drawn allocation
  // (its bottom at columns first..last) and the stack's top per column
  // (which equals the line's high: the server makes the band so).
  function stackAllocations(layout) {
    const width = layout.band.length;
    const top = Float64Array.from(layout.band, Number);
    const bands = layout.allocations.map((a) => {
      const first = Math.max(0, a.first_column);
      const last = Math.min(width - 1, a.last_column);
      const bottoms = new Float64Array(Math.max(0, last - first + 1));
      for (let c = first; c <= last; c++) {
        bottoms[c - first] = top[c];
        top[c] += Number(a.size);
      }
      return { first, last, bottoms };
    });
    return { bands, top };
  }

  // The offline page's allocation view for a window: the embedded layout
  // (memsnap plot --max-entries: `allocations` of a run, one axis `event` or
  // `time`, evenly spaced columns over the whole trace) cut to the columns
  // the window [from, to] touches and, where they outnumber `width` (the
  // canvas' pixels), merged in groups as the server makes columns: each group
  // taken at its member where the line is highest, so the top is still the
  // true peak and an allocation is drawn in a group when it is live there.
  // Returns what GET /api/layout answers (band, high, allocations with their
  // columns, sources) plus colFrom and colStep (where column 0 starts and how
  // wide a column is, in the axis' units), or null when the run embeds no
  // such axis.
  function sliceAllocations(embedded, axisKey, from, to, width = Infinity) {
    const axis = embedded && embedded[axisKey];
    if (!axis) return null;
    const columns = axis.band.length;
    const step = (axis.to - axis.from) / columns;
    if (!(step > 0)) return null;
    const c0 = Math.min(columns - 1, Math.max(0, Math.floor((from - axis.from) / step)));
    const c1 = Math.min(columns - 1, Math.max(c0, Math.ceil((to - axis.from) / step) - 1));
    const group = Math.max(1, Math.ceil((c1 - c0 + 1) / Math.max(1, Math.floor(width))));
    const taken = []; // per drawn column: the embedded column it is taken at
    for (let g0 = c0; g0 <= c1; g0 += group) {
      let best = g0;
      for (let c = g0 + 1; c <= Math.min(c1, g0 + group - 1); c++) if (axis.high[c] > axis.high[best]) best = c;
      taken.push(best);
    }
    // The first drawn column taken at or after embedded column c.
    const firstAtOrAfter = (c) => {
      let lo = 0;
      let hi = taken.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (taken[mid] < c) lo = mid + 1;
        else hi = mid;
      }
      return lo;
    };
    const items = embedded.items;
    const allocations = [];
    for (let k = 0; k < items.entry.length; k++) {
      const first = axis.first[k];
      if (first < 0 || first > c1 || axis.last[k] < c0) continue;
      const a = firstAtOrAfter(first);
      const b = firstAtOrAfter(axis.last[k] + 1) - 1;
      if (a > b) continue; // live only between the columns drawn
      allocations.push({
        entry: items.entry[k], size: items.size[k], first_column: a, last_column: b,
        end_entry: items.end_entry[k] < 0 ? null : items.end_entry[k], time_s: items.time_s[k], end_time_s: items.end_time_s[k],
        source: items.source[k], category: items.category[k], stack: items.stack[k], matches: false,
      });
    }
    return {
      band: taken.map((c) => axis.band[c]), high: taken.map((c) => axis.high[c]), allocations, sources: embedded.sources,
      complete: false, query: null, matched: 0, colFrom: axis.from + c0 * step, colStep: group * step,
    };
  }

  // The drawn allocation under (column, bytes), as an index into
  // layout.allocations, or -1 (the band of the rest, or above the top).
  function allocationAtPoint(layout, stacked, column, bytes) {
    for (let k = 0; k < stacked.bands.length; k++) {
      const b = stacked.bands[k];
      if (column < b.first || column > b.last) continue;
      const bottom = b.bottoms[column - b.first];
      if (bytes >= bottom && bytes < bottom + Number(layout.allocations[k].size)) return k;
    }
    return -1;
  }


  // The layers a stacked view draws, bottom to top, for one mode's decoded
  // stack (decodeStacks) in view `viewKey` ('time' | 'index'), with `sources`
  // of its sources in a layer each (stacked by source; pass Infinity to keep
  // the data's layers): the data's top sources first, then the parts of
  // "other sources" taken out of it (or, for fewer, the top sources beyond
  // `sources` folded into it), so the layers always sum to the same total.
  // Order: "before the trace" at the bottom (older than anything the trace
  // allocated), then the rest by steadiness, steadiest lowest: long-lived
  // memory at the bottom, what rises and falls on top. Steadiness is taken
  // over the wall-clock view's buckets where the run has them (else the
  // event-index view's), so both x axes stack alike; ties keep the data's
  // order. Returns { names, layers: [Float64Array], rank (a source's place
  // in the data's ranking, for its colour; -1 for the other layers),
  // steadiness, shown (sources with a layer), available (the most it can
  // have) }, or null when the view has no buckets.
  function stackLayout(stack, viewKey, sources = Infinity) {
    if (!stack || !stack[viewKey]) return null;
    const fixed = new Set([BEFORE_TRACE_LAYER, OTHER_SOURCES_LAYER, REUSED_LAYER]);
    const own = [];
    stack.names.forEach((name, k) => { if (!fixed.has(name)) own.push(k); });
    const partNames = stack.parts ? stack.parts.names : [];
    const available = own.length + partNames.length;
    const shown = Math.max(0, Math.min(available, Number.isFinite(sources) ? Math.floor(sources) : available));
    const build = (key) => {
      const sv = stack[key];
      if (!sv) return null;
      const parts = stack.parts && stack.parts[key];
      const entries = [];
      let other = null;
      const otherIndex = stack.names.indexOf(OTHER_SOURCES_LAYER);
      const otherValues = () => {
        if (!other) {
          other = { name: OTHER_SOURCES_LAYER, values: otherIndex >= 0 ? Float64Array.from(sv.layers[otherIndex]) : new Float64Array(sv.count), rank: -1 };
        }
        return other.values;
      };
      stack.names.forEach((name, k) => {
        if (name === BEFORE_TRACE_LAYER) entries.push({ name, values: sv.layers[k], rank: -1 });
      });
      own.forEach((k, rank) => {
        if (rank < shown) {
          entries.push({ name: stack.names[k], values: sv.layers[k], rank });
        } else {
          const o = otherValues();
          for (let b = 0; b < sv.count; b++) o[b] += sv.layers[k][b];
        }
      });
      for (let j = 0; j < shown - own.length && parts; j++) {
        const o = otherValues();
        for (let b = 0; b < sv.count; b++) o[b] -= parts.layers[j][b];
        entries.push({ name: partNames[j], values: parts.layers[j], rank: own.length + j });
      }
      if (otherIndex >= 0) otherValues();
      if (other && other.values.some((v) => v !== 0)) entries.push(other);
      stack.names.forEach((name, k) => {
        if (name === REUSED_LAYER) entries.push({ name, values: sv.layers[k], rank: -1 });
      });
      return entries;
    };
    const entries = build(viewKey);
    const reference = (stack.time ? build('time') : entries) || entries;
    const steady = new Map(reference.map((e) => [e.name, steadiness(e.values)]));
    const order = entries.map((e, i) => ({ e, i, s: steady.has(e.name) ? steady.get(e.name) : steadiness(e.values) }));
    order.sort((a, b) => {
      const ab = a.e.name === BEFORE_TRACE_LAYER;
      const bb = b.e.name === BEFORE_TRACE_LAYER;
      if (ab !== bb) return ab ? -1 : 1;
      return b.s - a.s || a.i - b.i;
    });
    return {
      names: order.map((o) => o.e.name),
      layers: order.map((o) => o.e.values),
      rank: order.map((o) => o.e.rank),
      steadiness: order.map((o) => o.s),
      shown: Math.min(shown, available),
      available,
    };
  }

  function hasEventColumns(raw) {
    return typeof raw.start_event === 'string' && typeof raw.end_event === 'string';
  }

  // Annotation bars are stacked: depth = how many earlier ones are still open.
  function annotationDepths(list) {
    const order = list.map((_, i) => i).sort((a, b) => list[a].start_s - list[b].start_s);
    const depth = new Array(list.length).fill(0);
    const open = [];
    for (const i of order) {
      const start = list[i].start_s;
      for (let k = open.length - 1; k >= 0; k--) if (open[k] <= start) open.splice(k, 1);
      depth[i] = open.length;
      open.push(list[i].end_s == null ? Infinity : list[i].end_s);
    }
    return depth;
  }

  // A step function {count, t_us, bytes} (reserved memory, free memory, the
  // largest free block over time), decoded; null when absent or empty.
  // A step series of the data (`x`: t_us, or entry on the event axis) as
  // { count, t, bytes }, t in the axis' units; null when absent or empty.
  function stepSeries(raw, what, x = 't_us') {
    const n = count(raw);
    if (n === 0) return null;
    return { count: n, t: column(raw[x], n, 'f64', `${what}.${x}`), bytes: column(raw.bytes, n, 'f64', `${what}.bytes`) };
  }

  // The data's `whatif` (see web/README.md): the simulated line and what the
  // legend says of it; null when absent or when the model could not run.
  function decodeWhatIf(raw, what) {
    if (!raw || !raw.possible) return null;
    const reserved = stepSeries(raw.reserved, `${what}.reserved`);
    const reservedByEntry = stepSeries(raw.reserved_by_entry, `${what}.reserved_by_entry`, 'entry');
    if (!reserved && !reservedByEntry) return null;
    return {
      settings: String(raw.settings),
      reserved,
      reservedByEntry,
      peak: Number(raw.peak_reserved) || 0,
      recordedPeak: Number(raw.recorded_peak_reserved) || 0,
      capacity: Number(raw.capacity) || 0,
      modelOoms: Number(raw.model_ooms) || 0,
      exact: raw.model_segments_exact === true,
    };
  }

  // The value of a step function at x: its last point at or before x (null before the first).
  function stepValueAt(series, x) {
    if (!series) return null;
    let lo = 0;
    let hi = series.count;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (series.t[mid] <= x) lo = mid + 1;
      else hi = mid;
    }
    return lo === 0 ? null : series.bytes[lo - 1];
  }

  // Runs that peak alike: sorted by absolute peak, a group holds the runs
  // within `tolerance` of its lowest peak (as `memsnap ranks` groups ranks,
  // without its top-sources test, which the page's data cannot make).
  // Highest group first: [{ members: [ordinal, ...], peakMin, peakMax }].
  function groupRunsByPeak(runs, tolerance = 0.01) {
    const sorted = runs.map((r) => ({ ordinal: r.ordinal, peak: Number(r.stats.absolute_peak) || 0 }))
      .sort((a, b) => a.peak - b.peak || a.ordinal - b.ordinal);
    const groups = [];
    let group = null;
    for (const r of sorted) {
      if (!group || r.peak > group.peakMin + tolerance * Math.abs(group.peakMin)) {
        group = { members: [], peakMin: r.peak, peakMax: r.peak };
        groups.push(group);
      }
      group.members.push(r.ordinal);
      group.peakMax = r.peak;
    }
    for (const g of groups) g.members.sort((a, b) => a - b);
    return groups.reverse();
  }

  // One entry of the data's `runs`, decoded. Throws on a malformed column.
  function prepareRun(raw, ordinal) {
    const what = `runs[${ordinal}]`;
    const stats = raw.stats || {};
    const run = {
      ordinal,
      label: raw.label != null && raw.label !== '' ? String(raw.label) : `run ${ordinal + 1}`,
      file: raw.file != null ? String(raw.file) : '',
      device: raw.device,
      stats,
      baseline: Number(stats.baseline) || 0,
      time: decodeBuckets(raw.time_buckets, 'bucket_us', `${what}.time_buckets`),
      index: decodeBuckets(raw.index_buckets, 'bucket_events', `${what}.index_buckets`),
      reserved: stepSeries(raw.reserved, `${what}.reserved`),
      reservedByEntry: stepSeries(raw.reserved_by_entry, `${what}.reserved_by_entry`, 'entry'),
      free: stepSeries(raw.free, `${what}.free`),
      largestFree: stepSeries(raw.largest_free, `${what}.largest_free`),
      // `plot --whatif CONF`: reserved memory as the allocator model had it
      // under those settings (null: not asked, or the model could not run).
      whatif: decodeWhatIf(raw.whatif, `${what}.whatif`),
      whatifReason: raw.whatif && !raw.whatif.possible ? String(raw.whatif.impossible_reason || '') : '',
      steps: Array.isArray(raw.steps) ? raw.steps : [],
      stepsSource: raw.steps_source && typeof raw.steps_source === 'object' ? raw.steps_source : null,
      annotations: Array.isArray(raw.annotations) ? raw.annotations : [],
      oom: Array.isArray(raw.oom) ? raw.oom : [],
      sources: Array.isArray(raw.sources) ? raw.sources.map(String) : [],
      life: decodeLifetimes(raw.lifetimes, `${what}.lifetimes`),
      moments: decodeMoments(raw.moments, `${what}.moments`),
      unlisted: decodeUnlisted(raw.unlisted, `${what}.unlisted`),
      stacks: decodeStacks(raw.stacks, `${what}.stacks`),
      // `memsnap oom --json`'s "oom" for each oom entry (the first 8), for the OOM panel.
      oomAnalyses: Array.isArray(raw.oom_analyses) ? raw.oom_analyses : [],
      // The allocator's segments and blocks at chosen moments (allocator panel);
      // null with allocatorReason when the C++ side could not replay them.
      allocator: raw.allocator && raw.allocator.available && Array.isArray(raw.allocator.moments) && raw.allocator.moments.length > 0
        ? raw.allocator : null,
      allocatorReason: raw.allocator && !raw.allocator.available ? String(raw.allocator.reason || '') : '',
    };
    run.annotationDepth = annotationDepths(run.annotations);
    run.timeSpanUs = run.time ? run.time.count * run.time.width : 0;
    run.durationS = run.time ? Math.max(run.timeSpanUs / 1e6, Number(stats.duration_s) || 0) : 0;
    return run;
  }

  // ---------------------------------------------------------------- aggregation

  // Display bucket j covers [edges[j], edges[j+1]) on the x axis (base units:
  // µs or events). It takes the min of the mins and the max of the maxes of
  // every base bucket that overlaps it, so the true peak and trough always
  // survive. Arrays get one entry per edge: the last one closes the last step.
  // null past the run's end.
  // The buckets of `width` (of `total`) that display bucket j overlaps, as
  // [i0, i1] inclusive; null when it starts past the last one.
  function overlapped(edges, j, width, total) {
    const i0 = Math.floor(edges[j] / width + EPS);
    if (i0 >= total) return null;
    const i1 = Math.min(total - 1, Math.ceil(edges[j + 1] / width - EPS) - 1);
    return [i0, Math.max(i0, i1)];
  }

  function regroup(buckets, edges, offset) {
    const n = edges.length - 1;
    const lo = new Array(n + 1).fill(null);
    const hi = new Array(n + 1).fill(null);
    const { width, count: total, min, max } = buckets;
    let last = -1;
    for (let j = 0; j < n; j++) {
      const range = overlapped(edges, j, width, total);
      if (!range) break;
      const [i0, i1] = range;
      let a = Infinity;
      let b = -Infinity;
      for (let i = i0; i <= i1; i++) {
        if (min[i] < a) a = min[i];
        if (max[i] > b) b = max[i];
      }
      lo[j] = a + offset;
      hi[j] = b + offset;
      last = j;
    }
    if (last >= 0) {
      lo[last + 1] = lo[last];
      hi[last + 1] = hi[last];
    }
    return { lo, hi, last };
  }

  // The stacked view on display buckets: stack bucket i covers [i*width,
  // (i+1)*width) and holds each layer's bytes where it peaked. Display bucket
  // j shows the stack bucket with the largest total among those it overlaps
  // (the first on ties), so its layers still sum to its max. Edges must be
  // multiples of `width`. Arrays get one entry per edge, like regroup.
  function regroupStacked(stack, width, edges) {
    const n = edges.length - 1;
    const { layers, count: total } = stack;
    const K = layers.length;
    const out = layers.map(() => new Array(n + 1).fill(null));
    let last = -1;
    for (let j = 0; j < n; j++) {
      const range = overlapped(edges, j, width, total);
      if (!range) break;
      const [i0, i1] = range;
      let best = i0;
      let bestSum = -Infinity;
      for (let i = i0; i <= i1; i++) {
        let sum = 0;
        for (let k = 0; k < K; k++) sum += layers[k][i];
        if (sum > bestSum) {
          bestSum = sum;
          best = i;
        }
      }
      for (let k = 0; k < K; k++) out[k][j] = layers[k][best];
      last = j;
    }
    if (last >= 0) for (let k = 0; k < K; k++) out[k][last + 1] = out[k][last];
    return { layers: out, last };
  }

  // Running sums bottom-up: cumulative[k][j] = layers 0..k at j (null stays null).
  function cumulative(layers) {
    const out = [];
    layers.forEach((row, k) => {
      out.push(row.map((v, j) => (v == null ? null : (k === 0 ? 0 : out[k - 1][j]) + v)));
    });
    return out;
  }

  // Reserved bytes: a step series (bytes[k] from t[k] on). Each display bucket
  // shows the largest value in effect during it.
  function regroupSteps(reserved, edges, last) {
    const out = new Array(edges.length).fill(null);
    const { t, bytes, count: total } = reserved;
    let p = -1;
    for (let j = 0; j <= last; j++) {
      const x0 = edges[j];
      const x1 = edges[j + 1];
      while (p + 1 < total && t[p + 1] <= x0) p++;
      let m = p >= 0 ? bytes[p] : -Infinity;
      for (let q = p + 1; q < total && t[q] < x1; q++) if (bytes[q] > m) m = bytes[q];
      out[j] = m === -Infinity ? null : m;
    }
    if (last >= 0) out[last + 1] = out[last];
    return out;
  }

  function uniformEdges(G, span) {
    const n = Math.max(1, Math.ceil(span / G - EPS));
    return Array.from({ length: n + 1 }, (_, j) => j * G);
  }

  // Event-index edges: `coarse` steps everywhere, `fine` steps inside
  // [from, to). Every edge stays a multiple of the base bucket.
  function zoomedEdges(coarse, fine, from, to, span) {
    const edges = [];
    let x = 0;
    while (x < span) {
      edges.push(x);
      x += x >= from && x < to ? fine : coarse;
    }
    edges.push(x);
    return edges;
  }

  // The note under the chart when the wall-clock precision drawn is not the
  // one asked for: one sentence, what is shown and why. `reason` is 'finer'
  // (below the recorded bucket width), 'limit' (the point limit) or 'rounded'
  // (to a whole number of recorded buckets). Empty when the two read the same.
  function precisionNote(requestedMs, shownMs, baseMs, reason, limit = TIME_POINT_LIMIT) {
    const asked = formatMs(requestedMs);
    const shown = formatMs(shownMs);
    if (!reason || asked === shown) return '';
    const why = {
      finer: 'the finest buckets this file records',
      limit: `the finest that keeps at most ${formatCount(limit)} points per run`,
      rounded: `a whole number of the recorded ${formatMs(baseMs)} ms buckets`,
    }[reason];
    return `Precision: asked for ${asked} ms, showing ${shown} ms, ${why}.`;
  }

  // Wall-clock grid for runs whose largest base bucket is `base` µs and longest
  // span `span` µs: k base buckets per display bucket, k = round(requested /
  // base), clamped to at least 1 and to at most `limit` buckets. `reason` says
  // why the drawn precision (G / 1000 ms) differs from the requested one, and
  // `warn` says it in one sentence (precisionNote).
  function timeGrid(base, span, requestedMs, limit = TIME_POINT_LIMIT) {
    const requestedUs = requestedMs * 1000;
    let k = Math.max(1, Math.round(requestedUs / base));
    let reason = '';
    if (Math.ceil(span / (k * base) - EPS) > limit) {
      k = Math.ceil(span / (limit * base));
      reason = 'limit';
    } else if (Math.abs(k * base - requestedUs) > base * 1e-6) {
      reason = requestedUs < base ? 'finer' : 'rounded';
    }
    const G = k * base;
    return { G, edges: uniformEdges(G, span), reason, warn: precisionNote(requestedMs, G / 1000, base / 1000, reason, limit) };
  }

  // Event-index grid: about `budget` buckets over the span; with `zoom`
  // ({min, max}, events) narrower than half the span, the visible window gets
  // its own budget (down to the base bucket). fineG is the step inside
  // `window` ({from, to}, coarse-aligned), G elsewhere.
  function indexGrid(base, span, zoom, budget = INDEX_POINT_BUDGET) {
    const G = Math.max(1, Math.ceil(span / (budget * base))) * base;
    const grid = { G, fineG: G, edges: uniformEdges(G, span), window: null };
    if (zoom && G > base && zoom.max - zoom.min < span / 2) {
      const fine = Math.max(base, Math.ceil((zoom.max - zoom.min) / (budget * base)) * base);
      if (fine < G) {
        const from = Math.max(0, Math.floor(zoom.min / G) * G);
        const to = Math.min(Math.ceil(span / G) * G, Math.ceil(zoom.max / G) * G);
        grid.edges = zoomedEdges(G, fine, from, to, span);
        grid.fineG = fine;
        grid.window = { from, to };
      }
    }
    return grid;
  }

  // y scale: always includes 0, 5% headroom.
  function yRange(min, max) {
    if (min == null || max == null || !Number.isFinite(min) || !Number.isFinite(max)) return [0, 1];
    const lo = Math.min(0, min);
    const hi = Math.max(0, max);
    const pad = (hi - lo) * 0.05 || 1024;
    return [lo < 0 ? lo - pad : 0, hi + pad];
  }

  // ---------------------------------------------------------------- drill-down

  // Allocations of decoded lifetimes `life` live at tUs (µs from the trace
  // start): start <= tUs and (end > tUs or still live), grouped by source
  // name. Two source ids with the same name share a row; an id past
  // `sources` is grouped as UNKNOWN_SOURCE.
  // The index of the moment nearest to tS (seconds); the earlier of two at
  // the same distance; -1 when there are none.
  function nearestMoment(moments, tS) {
    let best = -1;
    let bestD = Infinity;
    (moments || []).forEach((m, i) => {
      const d = Math.abs(Number(m.t_s) - tS);
      if (d < bestD) {
        best = i;
        bestD = d;
      }
    });
    return best;
  }

  // The allocator panel's moment for a click at tS (seconds from the trace
  // start): where the page holds a moment after every change of the
  // allocator (`every_change`), the last one at or before tS, which is the
  // state at tS; else the nearest one (nearestMoment). Returns { index,
  // moment, segments, exact } with the segments the moment draws, rebuilt
  // from each moment's `drawn` [slot, segment, ...] changes; null when the
  // allocator data has no moment.
  function allocatorMomentAt(allocator, tS) {
    const moments = (allocator && allocator.moments) || [];
    if (moments.length === 0) return null;
    let k;
    if (allocator.every_change) {
      let lo = 0;
      let hi = moments.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (Number(moments[mid].t_s) <= tS) lo = mid + 1;
        else hi = mid;
      }
      k = Math.max(0, lo - 1);
    } else {
      k = nearestMoment(moments, tS);
    }
    const table = allocator.segments || [];
    const ids = [];
    for (let j = 0; j <= k; j++) {
      const m = moments[j];
      const changes = m.drawn || [];
      for (let i = 0; i + 1 < changes.length; i += 2) ids[Number(changes[i])] = Number(changes[i + 1]);
      ids.length = Number(m.drawn_count) || 0;
    }
    const segments = [];
    for (const id of ids) {
      if (!(id >= 0 && id < table.length)) throw new Error(`allocator: moment ${k} draws segment ${id} of ${table.length}`);
      segments.push(table[id]);
    }
    return { index: k, moment: moments[k], segments, exact: !!allocator.every_change };
  }

  // A segment's blocks as [{ offset, size, state }] from the page's flat
  // [offset, size, state, ...] triples (state 0 allocated, 1 awaiting free,
  // 2 free), and the first free block of `largest` bytes marked.
  function segmentBlocks(flat, largest) {
    const out = [];
    let marked = false;
    for (let i = 0; i + 2 < (flat || []).length; i += 3) {
      const b = { offset: Number(flat[i]), size: Number(flat[i + 1]), state: Number(flat[i + 2]), largest: false };
      if (!marked && b.state === 2 && largest > 0 && b.size === largest) {
        b.largest = true;
        marked = true;
      }
      out.push(b);
    }
    return out;
  }

  function liveAt(life, sources, tUs) {
    if (!life) return scanLive(null, sources, 0);
    return scanLive({ ...life, open: life.f64 ? STILL_LIVE.f64 : STILL_LIVE.u32 }, sources, tUs);
  }

  // Does this run's data carry per-allocation event indices (start_event,
  // end_event)? A run without allocations needs none.
  function hasEventIndex(life) {
    return !life || !!(life.startEvent && life.endEvent);
  }

  // The same after event `e` (0-based index in the device's trace) has been
  // applied: start_event <= e and (end_event > e or still live). null when the
  // data has no event indices.
  function liveAtEvent(life, sources, e) {
    if (!life) return scanLive(null, sources, 0);
    if (!hasEventIndex(life)) return null;
    return scanLive({ count: life.count, start: life.startEvent, end: life.endEvent, size: life.size, source: life.source, open: STILL_LIVE_EVENT }, sources, e);
  }

  function scanLive(cols, sources, x) {
    const result = { bySource: new Map(), liveCount: 0, liveBytes: 0 };
    if (!cols) return result;
    const nSources = sources.length;
    const bytes = new Float64Array(nSources + 1);
    const counts = new Float64Array(nSources + 1);
    const { start, end, size, source, open } = cols;
    const n = cols.count;
    let liveCount = 0;
    let liveBytes = 0;
    for (let i = 0; i < n; i++) {
      if (start[i] > x) continue;
      const e = end[i];
      if (e > x || e === open) {
        let s = source[i];
        if (s >= nSources) s = nSources;
        bytes[s] += size[i];
        counts[s] += 1;
        liveCount += 1;
        liveBytes += size[i];
      }
    }
    for (let s = 0; s <= nSources; s++) {
      if (counts[s] === 0) continue;
      const name = s < nSources ? sources[s] : UNKNOWN_SOURCE;
      const row = result.bySource.get(name);
      if (row) {
        row.bytes += bytes[s];
        row.count += counts[s];
      } else result.bySource.set(name, { bytes: bytes[s], count: counts[s] });
    }
    result.liveCount = liveCount;
    result.liveBytes = liveBytes;
    return result;
  }

  // The drill-down table: one row per source live in any run, in the order of
  // `memsnap replay-to-time ... --json` "sources": one run by bytes desc, two
  // by |B − A| desc, more by the largest bytes; ties by name (UTF-8 order).
  // `pick(l)` gives the Map of one run's entry (default: its bySource), so
  // the unlisted rows (unlistedAt) sort the same way.
  function liveRows(live, pick = (l) => l.bySource) {
    const maps = live.map((l) => (l && pick(l)) || new Map());
    const names = new Set();
    for (const m of maps) for (const name of m.keys()) names.add(name);
    const rows = Array.from(names, (name) => ({
      source: name,
      bytes: maps.map((m) => (m.get(name) || { bytes: 0 }).bytes),
      count: maps.map((m) => (m.get(name) || { count: 0 }).count),
    }));
    if (live.length === 1) {
      rows.sort((a, b) => b.bytes[0] - a.bytes[0] || compareNames(a.source, b.source));
    } else if (live.length === 2) {
      rows.sort((a, b) => compareNames(a.source, b.source));
      rows.sort((a, b) => Math.abs(b.bytes[1] - b.bytes[0]) - Math.abs(a.bytes[1] - a.bytes[0]));
    } else {
      rows.sort((a, b) => Math.max(...b.bytes) - Math.max(...a.bytes) || compareNames(a.source, b.source));
    }
    return rows;
  }

  const api = Object.freeze({
    INDEX_POINT_BUDGET,
    TIME_POINT_LIMIT,
    STILL_LIVE,
    STILL_LIVE_EVENT,
    UNKNOWN_SOURCE,
    formatBytes,
    formatSignedBytes,
    formatCount,
    formatSignedCount,
    formatAxisBytes,
    formatSeconds,
    decimalsFor,
    formatIndexTick,
    formatMs,
    formatDuration,
    tickIncrs,
    formatTicks,
    distinguishingNames,
    printable,
    esc,
    withAlpha,
    compareNames,
    decodeBase64,
    column,
    count,
    decodeBuckets,
    decodeLifetimes,
    annotationDepths,
    prepareRun,
    regroup,
    regroupSteps,
    stepValueAt,
    groupRunsByPeak,
    decodeStacks,
    regroupStacked,
    cumulative,
    uniformEdges,
    zoomedEdges,
    precisionNote,
    timeGrid,
    indexGrid,
    yRange,
    nearestMoment,
    allocatorMomentAt,
    segmentBlocks,
    liveAt,
    liveAtMoment,
    nearestLiveMoment,
    hasEventIndex,
    liveAtEvent,
    liveRows,
    decodeUnlisted,
    unlistedAt,
    steadiness,
    stackLayout,
    stackAllocations,
    allocationAtPoint,
    sliceAllocations,
  });
  if (typeof module !== 'undefined' && module.exports) module.exports = api;
  else globalThis.MemsnapTransforms = api;
})();
