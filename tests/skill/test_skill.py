#!/usr/bin/env python3
"""The agent skill (skills/memsnap) says what memsnap does; this keeps it true.

SKILL.md: its front matter has a name and a description; every command line in
its ```sh blocks starts with `memsnap `, ends with `# exit N` (optionally
followed by `says "TEXT"`), and, run on generated snapshots (placeholders such
as a.pickle are mapped to files made by tests/gen/make_snapshot.py or to the
bundled example), exits N, prints TEXT (stdout or stderr) when given, prints
JSON when it has --json and exits 0, and on a failure prints nothing on stdout
and a reason on stderr. Every subcommand and --flag named in its code exists in
`memsnap --help`, and every subcommand of `memsnap --help` has an example.

evals.json: at least 8 entries, each with id, question, expected_behavior
(strings) and commands (memsnap lines); every command runs on the same
placeholders and never exits 2 (usage error): its subcommand and flags exist.

A test reports every failed check (pytest-check), not only the first.
"""
import argparse
import gzip
import json
import os
import pickle
import re
import shlex
import shutil
import subprocess
import sys

import pytest
from pytest_check import check

import testlib

HERE = os.path.dirname(os.path.abspath(__file__))

REPO = testlib.REPO
GENERATOR = os.path.join(REPO, 'tests', 'gen', 'make_snapshot.py')
EXAMPLE = os.path.join(REPO, 'examples', 'training_steps.pickle.gz')
DEFAULT_SKILL = os.path.join(REPO, 'skills', 'memsnap')
TIMEOUT_S = 120
MIN_EVALS = 8

# Placeholder file names used in SKILL.md and evals.json, and how to make each:
# generator arguments, 'example' (the bundled snapshot), or a function.
STEPS_A = ['--events', '3000', '--steps', '5', '--marks', '--seed', '1']
STEPS_B = ['--events', '4500', '--steps', '5', '--marks', '--seed', '2']


def make_untrusted(path, work):
    """A real snapshot plus one optional key holding an object whose pickle
    would call print() if CPython unpickled it; memsnap must refuse it (or, with
    --allow-objects, keep it inert). Written here, never loaded."""
    source = placeholder_path(work, 'nosteps.pickle')
    with open(source, 'rb') as f:
        snapshot = pickle.load(f)  # our own generated file

    class Payload:
        def __reduce__(self):
            return (print, ('memsnap executed the pickle',))

    snapshot['user_extra'] = Payload()
    with open(path, 'wb') as f:
        pickle.dump(snapshot, f)


def make_multi_device_oom(path, _work):
    """Two GPUs; device 1 runs out of memory, then the exception frees most
    tensors before the dump is written (what an OOM handler that dumps after
    `except torch.cuda.OutOfMemoryError` records). At the OOM 9 GiB were live
    in a 10 GiB segment and 4 GiB were asked with 100 MiB free on the device:
    capacity. The dump shows 8 GiB inactive, more than the request: read
    naively, "fragmentation". Device 0 has more entries and no OOM."""
    GiB = 1 << 30
    frames = [{'name': 'forward', 'filename': '/home/me/model.py', 'line': 12}]
    t = 1_700_000_000_000_000
    dev0, base0 = [], 0x7F0000000000
    for i in range(30):
        t += 10
        dev0.append({'action': 'alloc', 'addr': base0 + i * (1 << 20), 'size': 1 << 20, 'stream': 0,
                     'time_us': t, 'frames': frames})
    dev1, base1 = [], 0x7E0000000000
    t += 10
    dev1.append({'action': 'segment_alloc', 'addr': base1, 'size': 10 * GiB, 'stream': 0, 'time_us': t, 'frames': frames})
    for i in range(9):
        t += 10
        dev1.append({'action': 'alloc', 'addr': base1 + i * GiB, 'size': GiB, 'stream': 0, 'time_us': t,
                     'frames': frames})
    t += 10
    dev1.append({'action': 'oom', 'addr': 0, 'size': 4 * GiB, 'device_free': 100 << 20, 'stream': 0,
                 'time_us': t, 'frames': frames})
    for i in range(2, 9):
        for action in ('free_requested', 'free_completed'):
            t += 10
            dev1.append({'action': action, 'addr': base1 + i * GiB, 'size': GiB, 'stream': 0, 'time_us': t,
                         'frames': frames})

    def segment(device, address, total, allocated):
        blocks = [{'address': address + i * allocated[0], 'size': allocated[0], 'requested_size': allocated[0],
                   'state': 'active_allocated', 'frames': frames} for i in range(allocated[1])]
        used = allocated[0] * allocated[1]
        if used < total:
            blocks.append({'address': address + used, 'size': total - used, 'requested_size': 0,
                           'state': 'inactive', 'frames': []})
        return {'device': device, 'address': address, 'total_size': total, 'allocated_size': used,
                'active_size': used, 'requested_size': used, 'stream': 0, 'segment_type': 'large',
                'segment_pool_id': (0, 0), 'is_expandable': False, 'frames': frames, 'blocks': blocks}

    snapshot = {'segments': [segment(0, base0, 32 << 20, (1 << 20, 30)), segment(1, base1, 10 * GiB, (GiB, 2))],
                'device_traces': [dev0, dev1], 'allocator_settings': {}}
    with open(path, 'wb') as f:
        pickle.dump(snapshot, f, protocol=4)


FIXTURES = {
    'oom_multi.pickle': make_multi_device_oom,
    'a.pickle': STEPS_A,
    'b.pickle': STEPS_B,
    'runA/rank0.pickle': STEPS_A,
    'runB/rank0.pickle': STEPS_B,
    'runA/rank3.pickle': ['--events', '2500', '--steps', '5', '--marks', '--seed', '13'],
    'runB/rank3.pickle': ['--events', '4000', '--steps', '5', '--marks', '--seed', '14'],
    'run.pickle': 'example',
    'nosteps.pickle': ['--events', '1000', '--seed', '4'],
    'old.pickle': ['--events', '1000', '--no-time', '--seed', '8'],
    'oom.pickle': ['--events', '2000', '--oom', '--devices', '2', '--seed', '5'],
    'truncated.pickle': ['--events', '2000', '--steps', '4', '--ring-buffer', '800', '--seed', '6'],
    'eager.pickle': ['--events', '6000', '--steps', '5', '--seed', '21'],
    'graphed.pickle': ['--events', '400', '--steps', '5', '--graph-pool', '--seed', '22'],
    'huge.pickle.gz': ['--events', '5000', '--steps', '5', '--gzip', '--seed', '40'],
    'rank0.pickle': ['--events', '1500', '--steps', '3', '--seed', '30'],
    'rank1.pickle': ['--events', '2000', '--steps', '3', '--seed', '31'],
    'rank2.pickle': ['--events', '1500', '--steps', '3', '--seed', '32'],
    'rank3.pickle': ['--events', '1800', '--steps', '3', '--seed', '33'],
    'untrusted.pickle': make_untrusted,
}
PLACEHOLDER = re.compile(r'^[\w./-]+\.pickle(\.gz|\.zst)?$')
SHELL_SYNTAX = {'|', '||', '&&', ';', '>', '>>', '<', '&', '2>', '2>&1'}
EXIT_COMMENT = re.compile(r'\s#\s*exit\s+(\d+)(?:\s+says\s+"([^"]*)")?\s*$')


def placeholder_path(work, name):
    return os.path.join(work, name)


def make_fixtures(work):
    """Writes every placeholder file under `work`; returns the names made."""
    made = set()
    for name, recipe in FIXTURES.items():
        path = placeholder_path(work, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if recipe == 'example':
            if name.endswith('.gz'):
                shutil.copyfile(EXAMPLE, path)
            else:  # memsnap detects gzip by its magic bytes, not the name
                with gzip.open(EXAMPLE, 'rb') as src, open(path, 'wb') as dst:
                    shutil.copyfileobj(src, dst)
        elif callable(recipe):
            continue  # after the generated files it may read
        else:
            subprocess.run([sys.executable, GENERATOR, '--out', path] + recipe, check=True,
                           stdout=subprocess.DEVNULL)
        made.add(name)
    for name, recipe in FIXTURES.items():
        if callable(recipe):
            recipe(placeholder_path(work, name), work)
            made.add(name)
    return made


def front_matter(text):
    """The `key: value` pairs of the leading ---/--- block, or None."""
    lines = text.split('\n')
    if not lines or lines[0].strip() != '---':
        return None
    fields = {}
    for line in lines[1:]:
        if line.strip() == '---':
            return fields
        match = re.match(r'^([A-Za-z_][\w-]*):\s*(.*)$', line)
        if match:
            fields[match.group(1)] = match.group(2).strip()
    return None


def code_blocks(text):
    """(language, [(line number, line)]) for every fenced block."""
    blocks = []
    current = None
    for number, line in enumerate(text.split('\n'), 1):
        stripped = line.strip()
        if stripped.startswith('```'):
            if current is None:
                current = (stripped[3:].strip(), [])
            else:
                blocks.append(current)
                current = None
            continue
        if current is not None:
            current[1].append((number, line))
    return blocks


def inline_code(text):
    """Inline `code` spans outside fenced blocks."""
    outside = re.sub(r'```.*?```', '', text, flags=re.S)
    return re.findall(r'`([^`\n]+)`', outside)


def help_inventory(memsnap):
    """(subcommands, {subcommand: set of flags}, top-level flags) from --help."""
    top = subprocess.run([memsnap, '--help'], capture_output=True, text=True, timeout=TIMEOUT_S)
    subcommands = []
    in_list = False
    for line in top.stdout.splitlines():
        if line.startswith('Subcommands:'):
            in_list = True
            continue
        if in_list:
            match = re.match(r'^\s{2}([a-z][a-z-]*)\s', line)
            if not match:
                break
            subcommands.append(match.group(1))
    flags = {}
    for sub in subcommands:
        out = subprocess.run([memsnap, sub, '--help'], capture_output=True, text=True,
                             timeout=TIMEOUT_S).stdout
        options = out.split('Examples:')[0]  # the shared examples name other commands' flags
        flags[sub] = set(re.findall(r'(?<![\w-])(--[a-z][a-z-]*|-[a-z])\b', options))
    top_flags = set(re.findall(r'(?<![\w-])(--[a-z][a-z-]*)\b', top.stdout.split('Subcommands:')[0]))
    return subcommands, flags, top_flags


def split_command(line):
    """(argv, expected exit, expected text) of a SKILL.md sh line; raises
    ValueError with the reason when the line is not in the agreed form."""
    match = EXIT_COMMENT.search(line)
    if not match:
        raise ValueError('no trailing "# exit N" comment')
    command = line[:match.start()].strip()
    argv = shlex.split(command)
    if not argv or argv[0] != 'memsnap':
        raise ValueError('does not start with "memsnap "')
    bad = [t for t in argv if t in SHELL_SYNTAX]
    if bad:
        raise ValueError('shell syntax %r: the test runs the command without a shell' % bad)
    return argv, int(match.group(1)), match.group(2)


def run_command(memsnap, argv, work):
    """Runs argv (memsnap + arguments) in `work`; None when a placeholder is
    unknown (after a FAIL line), else the CompletedProcess."""
    unknown = [t for t in argv[1:] if PLACEHOLDER.match(t) and t not in FIXTURES]
    if unknown:
        return unknown
    return subprocess.run([memsnap] + argv[1:], cwd=work, capture_output=True,
                          timeout=TIMEOUT_S)


def check_skill(memsnap, skill_dir, work, subcommands, flags, top_flags):
    path = os.path.join(skill_dir, 'SKILL.md')
    if not check.is_true(os.path.isfile(path), 'SKILL.md exists: %s' % path):
        return 0
    with open(path, encoding='utf-8') as f:
        text = f.read()

    fields = front_matter(text)
    with check('front matter: a ---/--- block first'):
        assert fields is not None
    fields = fields or {}
    with check('front matter: name is memsnap'):
        assert fields.get('name') == 'memsnap', repr(fields.get('name'))
    with check('front matter: description'):
        assert len(fields.get('description', '')) >= 40, repr(fields.get('description'))

    all_flags = set().union(*flags.values()) | top_flags
    code_text = [line for _, lines in code_blocks(text) for _, line in lines] + inline_code(text)
    for sub in sorted({m for t in code_text for m in re.findall(r'\bmemsnap ([a-z][a-z-]*)(?![\w./-])', t)}):
        with check('SKILL.md: subcommand %s exists' % sub):
            assert sub in subcommands, 'memsnap --help lists %s' % subcommands
    for flag in sorted({m for t in code_text for m in re.findall(r'(?<![\w-])(--[a-z][a-z-]*)', t)}):
        with check('SKILL.md: flag %s exists' % flag):
            assert flag in all_flags, 'not in any --help'
    for flag in ('--frame-depth', '--top', '--device', '--json'):
        with check('SKILL.md: explains %s' % flag):
            assert ('`%s' % flag) in text

    ran = 0
    used = set()
    for language, lines in code_blocks(text):
        if language not in ('sh', 'bash', 'shell'):
            continue
        for number, line in lines:
            if not line.strip() or line.strip().startswith('#'):
                continue
            name = 'SKILL.md:%d %s' % (number, line.strip())
            try:
                argv, want, says = split_command(line)
            except ValueError as e:
                check.fail('%s: %s' % (name, e))
                continue
            result = run_command(memsnap, argv, work)
            ran += 1
            if isinstance(result, list):
                check.fail('%s: unknown placeholder %s (add it to FIXTURES)' % (name, result))
                continue
            if len(argv) > 1:
                used.add(argv[1])
            stdout = result.stdout.decode(errors='replace')
            stderr = result.stderr.decode(errors='replace')
            problems = []
            if result.returncode != want:
                problems.append('exit %d, want %d' % (result.returncode, want))
            if says is not None and says not in stdout + stderr:
                problems.append('does not say %r' % says)
            if want == 0 and result.returncode == 0 and '--json' in argv:
                try:
                    json.loads(stdout)
                except ValueError as e:
                    problems.append('stdout is not JSON: %s' % e)
            if want != 0 and result.returncode == want:
                # Exit 3 is memsnap check's verdict: its report is the output.
                if stdout and want != 3:
                    problems.append('a failure printed on stdout')
                if not stderr.strip():
                    problems.append('a failure gave no reason on stderr')
                if want == 1 and not stderr.startswith('memsnap: '):
                    problems.append('exit 1 without a "memsnap: " line: %r' % stderr[:120])
            with check(name):
                assert not problems, ('; '.join(problems) + ('; stderr: %s' % stderr.strip()[:300]
                                      if problems else ''))
    with check('SKILL.md: runs at least 20 command lines'):
        assert ran >= 20, 'ran %d' % ran
    for sub in subcommands:
        with check('SKILL.md: an example of memsnap %s' % sub):
            assert sub in used
    return ran


def check_evals(memsnap, skill_dir, work, subcommands):
    path = os.path.join(skill_dir, 'evals.json')
    if not check.is_true(os.path.isfile(path), 'evals.json exists: %s' % path):
        return 0
    try:
        with open(path, encoding='utf-8') as f:
            document = json.load(f)
    except ValueError as e:
        check.fail('evals.json is JSON: %s' % e)
        return 0
    evals = document.get('evals') if isinstance(document, dict) else None
    if not check.is_true(isinstance(evals, list), 'evals.json: an object with an "evals" list'):
        return 0
    with check('evals.json: at least %d evals' % MIN_EVALS):
        assert len(evals) >= MIN_EVALS, str(len(evals))
    ids = [e.get('id') for e in evals if isinstance(e, dict)]
    with check('evals.json: ids are unique'):
        assert len(ids) == len(set(ids)), str(ids)
    ran = 0
    for index, entry in enumerate(evals):
        label = 'eval %s' % (entry.get('id', index) if isinstance(entry, dict) else index)
        if not check.is_true(isinstance(entry, dict), label + ': an object'):
            continue
        with check(label + ': id'):
            assert isinstance(entry.get('id'), (str, int)) and str(entry.get('id'))
        with check(label + ': question'):
            assert (isinstance(entry.get('question'), str)
                    and len(entry['question']) >= 20)
        behaviour = entry.get('expected_behavior')
        with check(label + ': expected_behavior is a list of strings'):
            assert (isinstance(behaviour, list) and len(behaviour) >= 2
                    and all(isinstance(b, str) and b.strip() for b in behaviour))
        commands = entry.get('commands')
        if not check.is_true(isinstance(commands, list) and commands
                             and all(isinstance(c, str) and c.startswith('memsnap ') for c in commands),
                             label + ': commands is a list of memsnap lines'):
            continue
        for command in commands:
            name = '%s: %s' % (label, command)
            try:
                argv = shlex.split(command)
            except ValueError as e:
                check.fail('%s: %s' % (name, e))
                continue
            # `memsnap FILE` is `memsnap explain FILE`.
            if argv[1:2] and argv[1] not in subcommands and argv[1] not in FIXTURES:
                check.fail('%s: unknown subcommand %s' % (name, argv[1]))
                continue
            if any(t in SHELL_SYNTAX for t in argv):
                check.fail('%s: shell syntax: the test runs the command without a shell' % name)
                continue
            result = run_command(memsnap, argv, work)
            ran += 1
            if isinstance(result, list):
                check.fail('%s: unknown placeholder %s (add it to FIXTURES)' % (name, result))
                continue
            stdout = result.stdout.decode(errors='replace')
            problems = []
            # 3 is memsnap check's verdict (a limit violated), not a mistake in the line.
            if result.returncode not in (0, 1) and not (argv[1] == 'check' and result.returncode == 3):
                problems.append('exit %d (2 = usage error: a flag or argument memsnap does not '
                                'take)' % result.returncode)
            if result.returncode == 0 and '--json' in argv:
                try:
                    json.loads(stdout)
                except ValueError as e:
                    problems.append('stdout is not JSON: %s' % e)
            with check(name):
                assert not problems, ('; '.join(problems) + '; stderr: %s'
                                      % result.stderr.decode(errors='replace').strip()[:300])
        # What the eval's answer rests on, checked against memsnap's JSON:
        # {"command": "memsnap ... --json", "path": ["oom", "verdicts", 0], "equals": "capacity"}.
        for expect in entry.get('checks', []):
            argv = shlex.split(expect['command'])
            result = run_command(memsnap, argv, work)
            name = '%s: %s -> %s == %r' % (label, expect['command'], '.'.join(map(str, expect['path'])),
                                            expect['equals'])
            try:
                value = json.loads(result.stdout)
                for step in expect['path']:
                    value = value[step]
            except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
                check.fail('%s: no such value: %s' % (name, e))
                continue
            with check(name):
                assert value == expect['equals'], 'got %r' % (value,)
    return ran


def test_every_skill_command_runs_as_it_says(memsnap, work):
    """Every command line of SKILL.md and evals.json runs and exits as it says;
    every subcommand and flag it names exists."""
    os.makedirs(work, exist_ok=True)
    make_fixtures(work)
    subcommands, flags, top_flags = help_inventory(memsnap)
    with check('memsnap --help lists subcommands'):
        assert len(subcommands) >= 5, str(subcommands)
    skill_lines = check_skill(memsnap, DEFAULT_SKILL, work, subcommands, flags, top_flags)
    eval_lines = check_evals(memsnap, DEFAULT_SKILL, work, subcommands)
    print('ran %d SKILL.md command lines and %d evals.json commands' % (skill_lines, eval_lines))
