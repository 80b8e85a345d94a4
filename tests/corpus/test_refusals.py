#!/usr/bin/env python3
"""memsnap refuses hostile and broken files with one clear line, never a crash.

    python3 -m pytest tests/corpus/test_refusals.py --memsnap PATH [--batch PATH] [--work DIR]

Generates the corpus with make_refusals.py, then:
  - every file in expected.json: `memsnap parse FILE` exits with status 1 (no
    signal, no timeout), prints nothing on stdout and exactly one stderr line
    that starts with "memsnap: FILE: ", with the expected stable code (the
    batch runner's answer carries it; without --batch it is not seen) and
    the few words that are the point (the opcode a refusal names); a refusal
    of the pickle VM also says "(at byte offset N)" (check "offset", issue
    "House v2" item 8);
  - every {"same_as": B} file in must_parse.json (trailing bytes after STOP,
    gzip-compressed copies, another protocol) parses (exit 0) to the same
    `parse --json` as B, apart from the keys that describe the file itself;
  - every {"allow_objects": true} file is refused by default with its
    default_error, parses with --allow-objects, and `dump --allow-objects`
    shows the object as {"__object__": "module.name"}.
One line per check and a summary; the test fails listing every failed check.

With --batch (tests/corpus/cli_batch.cc), every command runs inside one
process per job (memsnap's run_cli, output captured) instead of one process
per command; a command the batch did not run (none, today) starts memsnap.
A crash then fails the whole batch, which names the command it was running.
"""

import argparse
import collections
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import testlib

HERE = Path(__file__).resolve().parent
MAKER = HERE / 'make_refusals.py'
TIMEOUT = 30
# keys of `parse --json` that describe the file rather than its content
FILE_KEYS = {'file', 'file_size_bytes', 'pickle_size_bytes', 'compression', 'pickle_protocol'}


# Results of the commands run in batch: tuple(args) -> (returncode, stdout, stderr, code).
BATCHED = {}


def run_batched(batch, commands, jobs, work):
    """Runs `commands` (argument lists) in `jobs` batch processes; fills BATCHED.
    Returns the problems: a batch that crashed or printed the wrong count."""
    problems = []
    chunks = [commands[i::jobs] for i in range(jobs) if commands[i::jobs]]

    def one(index, chunk):
        listing = os.path.join(work, 'batch-%d.jsonl' % index)
        with open(listing, 'w') as f:
            for args in chunk:
                f.write(json.dumps(args) + '\n')
        p = subprocess.run([batch, listing], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=TIMEOUT * len(chunk))
        lines = p.stdout.decode('utf-8', 'replace').splitlines()
        for args, text in zip(chunk, lines):
            result = json.loads(text)
            BATCHED[tuple(args)] = (result['status'], result['out'].encode('utf-8'), result['err'],
                                    result['code'])
        if p.returncode != 0 or len(lines) != len(chunk):
            last = p.stderr.decode('utf-8', 'replace').strip().splitlines()[-1:]
            return ('batch %d: %s after %d of %d commands; the last begun: %s'
                    % (index, describe_exit(p.returncode), len(lines), len(chunk), last))
        return None

    with concurrent.futures.ThreadPoolExecutor(max_workers=len(chunks) or 1) as pool:
        for problem in pool.map(lambda item: one(*item), enumerate(chunks)):
            if problem:
                problems.append(problem)
    return problems


def run(memsnap, args):
    """(returncode, stdout bytes, stderr text, error code); returncode None on
    timeout; the code None where the command ran in a process of its own (the
    command line prints no code)."""
    if tuple(args) in BATCHED:
        return BATCHED[tuple(args)]
    try:
        p = subprocess.run([memsnap] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, b'', '', None
    return p.returncode, p.stdout, p.stderr.decode('utf-8', 'replace'), None


def describe_exit(rc):
    if rc is None:
        return 'timed out after %d s' % TIMEOUT
    if rc < 0:
        return 'killed by signal %d' % -rc
    return 'exit status %d' % rc


# Issue "House v2", item 8: every refusal of the pickle VM (refused opcodes,
# truncations, memo errors, stack underflows, missing MARKs, a first byte that
# is no opcode, out-of-band buffers) says where it stopped, in one format, so
# that the user can look at the bytes. make_refusals.py marks these files
# with "byte_offset": true. memsnap built before the change words the memo
# errors and refused opcodes differently, so their "offset" checks fail there.
BYTE_OFFSET = re.compile(r'\(at byte offset \d+\)')


def check_refused(memsnap, path, spec, extra_args=()):
    """(what is wrong with the refusal, what is wrong with its byte offset):
    each None when fine; the second is None too for refusals from outside
    the VM."""
    rc, out, err, code = run(memsnap, ['parse', path] + list(extra_args))
    problems = []
    if rc != 1:
        problems.append(describe_exit(rc) + ' (want 1)')
    if code is not None and code != spec['code']:
        problems.append('code %s (want %s): %r' % (code, spec['code'], err.strip()[:300]))
    lines = err.splitlines()
    if len(lines) != 1:
        problems.append('%d stderr lines (want 1): %r' % (len(lines), err[:300]))
    prefix = 'memsnap: %s: ' % path
    if not err.startswith(prefix):
        problems.append('stderr does not start with %r: %r' % (prefix, err[:200]))
    for phrase in spec['says']:
        if phrase not in err:
            problems.append('stderr lacks %r: %r' % (phrase, err.strip()[:300]))
    if out:
        problems.append('stdout not empty: %r' % out[:120])
    offset_problem = None
    if spec['byte_offset'] and not BYTE_OFFSET.search(err):
        offset_problem = 'no "(at byte offset N)": %r' % err.strip()[:300]
    return '; '.join(problems) or None, offset_problem


def parse_json(memsnap, path, extra_args=()):
    rc, out, err, _ = run(memsnap, ['parse', path, '--json'] + list(extra_args))
    if rc != 0:
        raise AssertionError('%s: %s' % (describe_exit(rc), err.strip()[:300]))
    try:
        value = json.loads(out.decode('utf-8'))
    except (UnicodeDecodeError, ValueError) as e:
        raise AssertionError('parse --json output is not JSON: %s' % e)
    if not isinstance(value, dict):
        raise AssertionError('parse --json printed %s' % type(value).__name__)
    return value


def check_same_as(memsnap, path, other, warns=None):
    a = parse_json(memsnap, path)
    if warns is not None:
        # The one warning the file must add (bytes it did not read).
        added = [w for w in a.get('warnings', []) if warns in w]
        if len(added) != 1:
            raise AssertionError('no one warning says %r: %r' % (warns, a.get('warnings')))
        a['warnings'] = [w for w in a['warnings'] if w not in added]
        a.get('anomalies', {})['bytes_after_stop'] = 0  # the count the warning says
    b = parse_json(memsnap, other)
    b2 = parse_json(memsnap, other)
    volatile = {k for k in set(b) | set(b2) if b.get(k) != b2.get(k)}  # timings, if any
    ignore = FILE_KEYS | volatile
    diffs = [k for k in sorted((set(a) | set(b)) - ignore) if a.get(k) != b.get(k)]
    if diffs:
        k = diffs[0]
        raise AssertionError('parse --json differs from %s in %s: %r vs %r'
                             % (os.path.basename(other), diffs,
                                str(a.get(k))[:150], str(b.get(k))[:150]))
    return 'same parse --json as %s' % os.path.basename(other)


def check_allow_objects(memsnap, path, spec):
    problem, _ = check_refused(memsnap, path, spec['default_error'])  # offset: see parse_job
    if problem:
        raise AssertionError('without --allow-objects: ' + problem)
    parse_json(memsnap, path, ['--allow-objects'])
    rc, out, err, _ = run(memsnap, ['dump', path, '--allow-objects'])
    if rc != 0:
        raise AssertionError('dump --allow-objects: %s: %s' % (describe_exit(rc), err.strip()))
    value = json.loads(out.decode('utf-8'))
    for key in spec['object_at']:
        value = value.get(key) if isinstance(value, dict) else None
    want = {'__object__': spec['object_name']}
    if value != want:
        raise AssertionError('dump --allow-objects shows %r at %s, want %r'
                             % (value, '.'.join(spec['object_at']), want))
    return 'refused by default, parsed and dumped as %s with --allow-objects' % spec['object_name']


def run_corpus(memsnap, batch, work, jobs):
    """Every file of the corpus against what it must say (refused, or parsed
    like its twin); returns the failed lines."""
    os.makedirs(work, exist_ok=True)
    start = time.time()
    gen = subprocess.run([sys.executable, str(MAKER), work], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, timeout=300)
    assert gen.returncode == 0, 'make_refusals.py failed:\n' + gen.stdout.decode('utf-8', 'replace')
    with open(os.path.join(work, 'expected.json')) as f:
        expected = json.load(f)
    with open(os.path.join(work, 'must_parse.json')) as f:
        must_parse = json.load(f)

    batch_problems = []
    if batch:
        commands = []
        for name in sorted(expected):
            commands.append(['parse', os.path.join(work, name)])
        for name in sorted(must_parse):
            spec, path = must_parse[name], os.path.join(work, name)
            if spec.get('allow_objects'):
                commands += [['parse', path], ['parse', path, '--json', '--allow-objects'],
                             ['dump', path, '--allow-objects']]
            else:
                commands += [['parse', path, '--json'],
                             ['parse', os.path.join(work, spec['same_as']), '--json']]
        unique = list(dict.fromkeys(tuple(c) for c in commands))
        batch_problems = run_batched(batch, [list(c) for c in unique], max(1, min(jobs, os.cpu_count() or 1)), work)
        print('ran %d commands in %d batch process(es) (%.1f s)'
              % (len(unique), max(1, min(jobs, os.cpu_count() or 1)), time.time() - start))

    def refused_job(name):
        spec = expected[name]
        problem, offset_problem = check_refused(memsnap, os.path.join(work, name), spec)
        results = [('refused', name, problem is None,
                    problem or ' / '.join([spec['code']] + spec['says']))]
        if spec['byte_offset']:
            results.append(('offset', name, offset_problem is None,
                            offset_problem or 'says where it stopped'))
        return results

    def parse_job(name):
        spec = must_parse[name]
        path = os.path.join(work, name)
        results = []
        try:
            if spec.get('allow_objects'):
                detail = check_allow_objects(memsnap, path, spec)
                _, offset_problem = check_refused(memsnap, path, spec['default_error'])
                results.append(('offset', name, offset_problem is None,
                                offset_problem or 'says where it stopped'))
            else:
                detail = check_same_as(memsnap, path, os.path.join(work, spec['same_as']),
                                       spec.get('warns'))
            results.insert(0, ('parses', name, True, detail))
        except (AssertionError, ValueError) as e:
            results.insert(0, ('parses', name, False, str(e)))
        return results

    passed = failed = 0
    failures = []
    for problem in batch_problems:
        failed += 1
        failures.append('FAIL batch    ' + problem)
        print(failures[-1])
    quiet_pass = collections.Counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(refused_job, n) for n in sorted(expected)]
        futures += [pool.submit(parse_job, n) for n in sorted(must_parse)]
        for fut in futures:
            for check, name, ok, detail in fut.result():
                if ok:
                    passed += 1
                    # the truncations are many and alike: one line for all that pass
                    if name.startswith('truncated-'):
                        quiet_pass[check] += 1
                        continue
                    print('PASS %-8s %s: %s' % (check, name, detail))
                else:
                    failed += 1
                    line = 'FAIL %-8s %s: %s' % (check, name, detail)
                    failures.append(line)
                    print(line)
    for check, count in sorted(quiet_pass.items()):
        print('PASS %-8s %d truncations of small-p2.pickle / small-p4.pickle' % (check, count))
    print('\n%d checks: %d passed, %d failed (%.1f s)'
          % (passed + failed, passed, failed, time.time() - start))
    if failures:
        print('failures:')
        for line in failures:
            print('  ' + line)
    return failures


def test_every_file_of_the_refusal_corpus_says_what_it_must(memsnap, work, request):
    failures = run_corpus(memsnap, request.config.getoption('--batch'), os.path.join(work, 'corpus'),
                          min(8, 2 * (os.cpu_count() or 1)))
    assert not failures, '\n'.join(failures)


def test_the_batch_answers_each_command_as_asked(memsnap, request):
    """memsnap_cli_batch - (the truncation corpus' runner) answers as memsnap does,
    a report, a refusal and a usage error, one at a time from one process."""
    batch = request.config.getoption('--batch')
    if not batch:
        pytest.skip('needs --batch')
    example = os.path.join(testlib.REPO, 'examples', 'training_steps.pickle.gz')
    asked = [['parse', '--json', example], ['parse', os.path.join(testlib.REPO, 'README.md')],
             ['replay-step', example]]
    with testlib.Commands(memsnap, batch) as batched, testlib.Commands(memsnap) as alone:
        for args in asked:
            status, out, err = batched.run(args)
            want = alone.run(args)
            assert (status, out) == want[:2], args
            assert err.strip() == want[2].strip(), args
