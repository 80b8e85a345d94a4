#!/usr/bin/env python3
"""The wheels in --wheel-dir install and work where no compiler, no headers
and none of memsnap's C++ libraries can be reached: for every CPython on this
machine that one of the wheels is for (python3.9 ... python3.13 on PATH or
under pyenv), a fresh venv gets the wheel (numpy from PyPI), then, with this
machine's headers, compilers and C++ libraries hidden (tests/dist/isolation.py)
and an empty environment, `memsnap FILE` prints what the build's own binary
prints (--reference-memsnap), `import memsnap` reads the file, and
`memsnap serve` answers with its token. Every shared object in the installed
package needs only the C runtime (libc, libm, libpthread, libdl, librt,
ld-linux) and, at most, the system's libstdc++ and libgcc_s (what manylinux
allows); with --self-contained (the wheels of make dist), the wheel also
carries no library of its own (the dependencies are linked in, not grafted by
auditwheel), and needs no zlib either. Without it (the developer's wheel of
make wheel, which make test-python runs this on), zlib may be needed: the
manylinux policies auditwheel applies for recent glibc count libz.so.1 as the
system's."""
import glob
import json
import os
import re
import shutil
import subprocess
import tempfile

import isolation
import testlib

EXAMPLE = os.path.join(testlib.REPO, "examples", "training_steps.pickle.gz")
ALLOWED_NEEDED = re.compile(r"^(libc|libm|libpthread|libdl|librt|libgcc_s|libstdc\+\+)\.so\.\d+$|"
                            r"^ld-linux-x86-64\.so\.2$")
VERSIONS = ["3.9", "3.10", "3.11", "3.12", "3.13"]

# Run inside the hidden machine by the venv's python: the three ways in.
DRIVER = r'''
import http.client, json, os, signal, subprocess, sys, urllib.parse
venv, example = sys.argv[1], sys.argv[2]
assert not os.listdir("/usr/include"), "the machine's headers are in reach"
for name in os.listdir("/usr/lib/x86_64-linux-gnu"):
    if name.startswith(("libabsl_", "libfmt.", "libre2.")):
        assert os.path.getsize(os.path.join("/usr/lib/x86_64-linux-gnu", name)) == 0, name + " is in reach"
cli = os.path.join(venv, "bin", "memsnap")
result = {"report": subprocess.run([cli, example], capture_output=True, text=True, check=True).stdout}
import memsnap
result["peak"] = memsnap.load(example).parse()["replay"]["peak_delta"]
server = subprocess.Popen([cli, "serve", example, "--port", "0"], stdout=subprocess.PIPE, text=True)
try:
    url = urllib.parse.urlsplit(server.stdout.readline().strip())
    token = urllib.parse.parse_qs(url.query)["token"][0]
    connection = http.client.HTTPConnection("127.0.0.1", url.port, timeout=30)
    connection.request("GET", "/api/files?token=" + token)
    response = connection.getresponse()
    result["serve"] = [response.status, json.loads(response.read())]
finally:
    server.send_signal(signal.SIGINT)
    result["serve_exit"] = server.wait(timeout=30)
print(json.dumps(result))
'''


def interpreters():
    """(version, path) of each CPython 3.9+ this machine has."""
    found = {}
    pyenv_root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    for version in VERSIONS:
        candidates = [shutil.which("python" + version)]
        candidates += sorted(glob.glob(os.path.join(pyenv_root, "versions", version + ".*", "bin",
                                                    "python" + version)))
        for path in candidates:
            if path and os.access(path, os.X_OK) and not os.path.dirname(path).endswith("shims"):
                found[version] = path
                break
    return found


def wheel_for(wheel_dir, version):
    """The wheel this CPython installs: its own cpXY tag, or an abi3 wheel for an older one."""
    major, minor = (int(part) for part in version.split("."))
    own = glob.glob(os.path.join(wheel_dir, f"memsnap-*-cp{major}{minor}-cp{major}{minor}-*.whl"))
    if own:
        return own[0]
    for wheel in glob.glob(os.path.join(wheel_dir, "memsnap-*-abi3-*.whl")):
        abi3_minor = int(re.search(r"-cp3(\d+)-abi3-", wheel).group(1))
        if abi3_minor <= minor:
            return wheel
    return None


def needed(path):
    out = subprocess.run(["readelf", "-d", "-W", path], capture_output=True, text=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def cases(config):
    wheel_dir = config.getoption("--wheel-dir")
    if not wheel_dir or not glob.glob(os.path.join(wheel_dir, "memsnap-*.whl")):
        return []
    found = interpreters()
    return [(version, found[version], wheel_for(wheel_dir, version)) for version in VERSIONS
            if version in found and wheel_for(wheel_dir, version)]


def pytest_generate_tests(metafunc):
    if "case" in metafunc.fixturenames:
        found = cases(metafunc.config)
        metafunc.parametrize("case", found or [None], ids=[c[0] for c in found] or ["none"])


def test_a_wheel_serves_each_python_here(case, request):
    if case is None:
        testlib.skip_absent("a wheel in --wheel-dir for a CPython on this machine")
    version, python, wheel = case
    self_contained = request.config.getoption("--self-contained")
    with tempfile.TemporaryDirectory(prefix="memsnap_wheel_") as work:
        venv = os.path.join(work, "venv")
        subprocess.run([python, "-m", "venv", venv], check=True)
        subprocess.run([os.path.join(venv, "bin", "pip"), "install", "-q", "--disable-pip-version-check",
                        wheel], check=True)
        package = subprocess.run([os.path.join(venv, "bin", "python"), "-c",
                                  "import os, memsnap; print(os.path.dirname(memsnap.__file__))"],
                                 capture_output=True, text=True, check=True, cwd=work).stdout.strip()
        site = os.path.dirname(package)
        objects = glob.glob(os.path.join(package, "**", "*.so*"), recursive=True)
        grafted = glob.glob(os.path.join(site, "memsnap.libs", "*"))
        assert objects, f"no extension in {package}"
        allowed = {os.path.basename(path) for path in grafted}
        if not self_contained:
            allowed.add("libz.so.1")
        for path in objects + grafted:
            foreign = [name for name in needed(path) if not ALLOWED_NEEDED.match(name) and name not in allowed]
            assert not foreign, f"{os.path.basename(path)} needs {foreign}"
        if self_contained:
            assert not grafted, f"the wheel carries libraries of its own: {grafted}"
        driver = os.path.join(work, "driver.py")
        with open(driver, "w", encoding="utf-8") as handle:
            handle.write(DRIVER)
        example = os.path.join(work, "example.pickle.gz")
        shutil.copy2(EXAMPLE, example)
        ran = isolation.with_machine_hidden([os.path.join(venv, "bin", "python"), driver, venv, example],
                                            capture_output=True, text=True, timeout=300, cwd=work)
        assert ran.returncode == 0, ran.stderr
        result = json.loads(ran.stdout)
        reference = request.config.getoption("--reference-memsnap")
        if reference:
            expected = subprocess.run([os.path.abspath(reference), example], capture_output=True, text=True,
                                      check=True).stdout
            assert result["report"] == expected
        assert result["peak"] > 0
        status, files = result["serve"]
        assert status == 200 and "example.pickle.gz" in json.dumps(files)
        assert result["serve_exit"] == 0
