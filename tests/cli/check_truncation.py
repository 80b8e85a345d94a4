#!/usr/bin/env python3
"""Memory from before the trace is never named by a site it was not allocated at.

Each real fixture whose trace is complete on its device (every free_completed
matches an alloc) is cut as a ring buffer would cut it: the first K entries of
that device's trace are dropped and nothing else is rebuilt (K at a quarter,
half and three quarters of the trace). The allocations the dropped entries
left live are then memory from before the cut file's trace: those freed later
show up as frees without their alloc, the rest as the dump's blocks.

What must hold on every cut:
  * no free without its alloc is named as an allocation site other than its
    own: `events --json` names it "freed at ... (allocated before the trace)"
    or, where the file's frees carry their allocation's frames, by the site
    the uncut file names its alloc;
  * no row of `explain --json`'s before-the-trace table whose key_kind is
    allocation_site holds more than the uncut file's own baseline and the
    dropped allocations still live at the dump of that site;
  * the same cut of the file rewritten as `context="alloc"` writes it (each
    free's frames replaced by its alloc's) names every such free by its
    allocation site, exactly, where parse says free_frames.kind "allocation"
    (a cut with no matched pair left says "unknown" and names the frees as
    the freeing code's); the file as recorded never says "allocation".
And it measures, per file, the share of the dropped live bytes whose category
the cut file gets right against the uncut file's categories (per allocation
for the frees; per category for the dump's blocks). --table prints it.

Skips (exit 77) when the fixtures folder is absent.

    python3 -m pytest tests/cli/check_truncation.py --memsnap build/memsnap --part fixtures [--fixtures-dir DIR] [--batch build/tests/memsnap_cli_batch]
    python3 tests/cli/check_truncation.py --memsnap build/memsnap [--fixtures DIR] [--batch ...] --table

With --batch every command runs in one memsnap_cli_batch process.
"""
import argparse
import collections
import json
import os
import pickle
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # tests/, when run as a script for --table
import testlib  # noqa: E402
REPO = os.path.dirname(os.path.dirname(HERE))
FIXTURES = os.path.join(os.path.dirname(REPO), 'shared', 'fixtures', 'real')
CUTS = (0.25, 0.5, 0.75)
MIN_ENTRIES = 100
FREED_AT = 'freed at '
BEFORE = ' (allocated before the trace)'


def replay(trace):
    """(live at the end {addr: index}, unmatched free_completed indices, freed {alloc index: free index})."""
    live, unmatched, freed = {}, [], {}
    for i, entry in enumerate(trace):
        action = entry.get('action')
        if action == 'alloc':
            live[entry['addr']] = i
        elif action == 'free_completed':
            at = live.pop(entry['addr'], None)
            if at is None:
                unmatched.append(i)
            else:
                freed[at] = i
    return live, unmatched, freed


def as_alloc_context(trace):
    """The trace as context="alloc" records it: each matched free carries its alloc's frames."""
    out, live = [], {}
    for entry in trace:
        entry = dict(entry)
        action = entry.get('action')
        if action == 'alloc':
            live[entry['addr']] = entry.get('frames', [])
        elif action in ('free_requested', 'free_completed') and entry['addr'] in live:
            entry['frames'] = live[entry['addr']]
            if action == 'free_completed':
                del live[entry['addr']]
        out.append(entry)
    return out


def baseline_rows(explain, table):
    rows = explain['baseline'][table]['rows']
    return rows


def check_cut(memsnap, path, snapshot, device, k, uncut_events, uncut_explain, work, alloc_context):
    """One cut; returns (failures, measures)."""
    failures = []
    trace = snapshot['device_traces'][device]
    if alloc_context:
        trace = as_alloc_context(trace)
    # The truth: what the dropped entries left live, named as the uncut file names it.
    live_at_k, _, _ = replay(trace[:k])
    names = uncut_events['events']
    dropped = {addr: (trace[i]['size'], names[i]['source'], names[i]['category'])
               for addr, i in live_at_k.items()}

    cut = dict(snapshot)
    traces = list(snapshot['device_traces'])
    traces[device] = trace[k:]
    cut['device_traces'] = traces
    cut_path = os.path.join(work, f'cut_{k}{"_alloc" if alloc_context else ""}.pickle')
    with open(cut_path, 'wb') as out:
        pickle.dump(cut, out, protocol=4)
    cut_parse = memsnap.json('parse', cut_path, '--device', str(device))
    want_kind = 'allocation' if alloc_context else 'free'
    if cut_parse['free_frames']['kind'] not in (want_kind, 'unknown'):
        failures.append(f'K={k}: free_frames.kind {cut_parse["free_frames"]["kind"]}, want {want_kind}')
    cut_events = memsnap.json('events', cut_path, '--device', str(device))['events']
    cut_explain = memsnap.json('explain', cut_path, '--device', str(device), '--top',
                               '1000000')

    measures = collections.Counter()
    _, unmatched, _ = replay(trace[k:])
    freed_addrs = set()
    free_categories = collections.Counter()
    for i in unmatched:
        addr = trace[k + i]['addr']
        if addr not in dropped or addr in freed_addrs:
            continue
        freed_addrs.add(addr)
        size, true_source, true_category = dropped[addr]
        named = cut_events[i]['source']
        category = cut_events[i]['category']
        free_categories[category] += size
        measures['freed_bytes'] += size
        measures[('confusion', true_category, category)] += size
        is_free_site = named.startswith(FREED_AT) and named.endswith(BEFORE)
        if is_free_site:
            measures['named_as_free_bytes'] += size
        elif named.startswith('<'):
            pass  # a placeholder (<no frames>): it claims no site
        elif named != true_source:
            measures['wrong_site_bytes'] += size
            failures.append(f'K={k}: a free at 0x{addr:x} ({size} B) is named {named!r}; '
                            f'its alloc was at {true_source!r}')
        if alloc_context and cut_parse['free_frames']['kind'] == 'allocation' and \
                named != true_source:
            failures.append(f'K={k} (context="alloc"): a free at 0x{addr:x} is named {named!r}, '
                            f'not its allocation site {true_source!r}')
        if category == true_category:
            measures['category_right_bytes'] += size

    # The dump's blocks, and under context="alloc" the frees too: by row,
    # counted in allocations (a block's size is rounded, an alloc's is not),
    # against the uncut file's own rows plus the dropped allocations.
    held = {addr: v for addr, v in dropped.items() if addr not in freed_addrs}
    allowed = collections.Counter()
    for row in baseline_rows(uncut_explain, 'by_source'):
        allowed[row['source']] += row['count']
    held_categories = collections.Counter()
    for addr, (size, source, category) in dropped.items():
        allowed[source] += 1
        if addr in held:
            held_categories[category] += size
            measures['held_bytes'] += size
    for row in baseline_rows(cut_explain, 'by_source'):
        if row['key_kind'] == 'allocation_site' and row['count'] > allowed[row['source']]:
            failures.append(f'K={k}: before the trace, {row["count"]} allocations at '
                            f'{row["source"]!r}; at most {allowed[row["source"]]} were made there')
    # Categories of the held blocks: the cut's before-the-trace categories less
    # the frees' and the uncut file's own.
    cut_categories = collections.Counter()
    for row in baseline_rows(cut_explain, 'by_category'):
        cut_categories[row['source']] += row['bytes']
    for row in baseline_rows(uncut_explain, 'by_category'):
        cut_categories[row['source']] -= row['bytes']
    for category, size in free_categories.items():
        cut_categories[category] -= size
    for category, size in held_categories.items():
        measures['category_right_bytes'] += min(size, max(cut_categories[category], 0))
    return failures, measures


def devices_and_snapshot(path):
    with open(path, 'rb') as f:
        snapshot = pickle.load(f)  # a fixture from the project's own folder: trusted
    if not isinstance(snapshot, dict):
        return None, None
    return snapshot, snapshot.get('device_traces') or []


def cut_every_fixture(memsnap, fixtures):
    """Every complete fixture cut at each point, as recorded and as
    context="alloc" writes frees; `memsnap` a testlib.Commands. Returns (the
    failures, each file's measures)."""
    failed = []
    checked_frees = 0
    table = []
    with tempfile.TemporaryDirectory(prefix='memsnap-truncation-') as work:
        for name in sorted(os.listdir(fixtures)):
            if not name.endswith(('.pickle', '.pkl')):
                continue
            path = os.path.join(fixtures, name)
            snapshot, traces = devices_and_snapshot(path)
            if snapshot is None:
                continue
            uncut_events_doc = memsnap.json('events', path)
            device = uncut_events_doc['device']
            if device >= len(traces) or len(traces[device]) < MIN_ENTRIES:
                continue
            if replay(traces[device])[1]:
                continue  # the trace itself starts mid-run: no truth to cut from
            uncut_explain = memsnap.json('explain', path, '--top', '1000000')
            for alloc_context in (False, True):
                uncut_events = uncut_events_doc
                total = collections.Counter()
                problems = []
                for fraction in CUTS:
                    k = int(len(traces[device]) * fraction)
                    failures, measures = check_cut(memsnap, path, snapshot, device, k,
                                                   uncut_events, uncut_explain, work,
                                                   alloc_context)
                    problems += failures
                    total += measures
                checked_frees += total['freed_bytes'] > 0
                label = f'{name} (as context="alloc")' if alloc_context else name
                if problems:
                    failed.append(label + ''.join(f'\n    {problem}' for problem in problems[:10]))
                    print(f'FAIL {failed[-1]}')
                else:
                    print(f'ok   {label}')
                if not alloc_context:
                    table.append((name, total))
    if checked_frees == 0:
        failed.append('no cut left a free without its alloc to check')
    print(f'{len(table)} fixtures cut at {len(CUTS)} points, {len(failed)} failed')
    return failed, table


@pytest.mark.fixtures
def test_no_cut_names_memory_by_a_site_it_was_not_allocated_at(memsnap, fixtures_dir, request):
    with testlib.Commands(memsnap, request.config.getoption('--batch')) as commands:
        failed, _ = cut_every_fixture(commands, fixtures_dir)
    assert not failed, '\n'.join(failed)


def main():
    """--table: the measures of every fixture as a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--memsnap', required=True)
    parser.add_argument('--batch', help='memsnap_cli_batch: every command in one process')
    parser.add_argument('--fixtures', default=FIXTURES)
    parser.add_argument('--table', action='store_true', help='print the measures as Markdown')
    args = parser.parse_args()
    with testlib.Commands(os.path.abspath(args.memsnap), args.batch) as commands:
        failed, table = cut_every_fixture(commands, args.fixtures)
    if args.table:
        print()
        print('| fixture | dropped, live at K (sum of 3 cuts) | freed later | named "freed at" '
              '| wrong site | category right |')
        print('|---|---:|---:|---:|---:|---:|')
        for name, m in table:
            dropped = m['freed_bytes'] + m['held_bytes']
            share = 100.0 * m['category_right_bytes'] / dropped if dropped else 0.0
            print(f'| {name[:60]} | {dropped / 2**20:,.1f} MiB | {m["freed_bytes"] / 2**20:,.1f} MiB '
                  f'| {m["named_as_free_bytes"] / 2**20:,.1f} MiB | {m["wrong_site_bytes"]} B '
                  f'| {share:.1f}% |')
        if os.environ.get('TRUNCATION_CONFUSION'):
            for name, m in table:
                pairs = sorted(((v, key[1], key[2]) for key, v in m.items()
                                if isinstance(key, tuple)), reverse=True)[:6]
                print(name[:50], ', '.join(f'{t}->{c} {v / 2**20:.0f}M' for v, t, c in pairs))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
