"""Running a program where nothing of this machine's build can help it: an
empty root (chroot, in a user namespace when not root), or this machine's
root with the headers, compilers and C++ libraries hidden (a mount
namespace). Shared by the tests of what `make dist` writes."""
import os
import shutil
import subprocess

import testlib

# The shared libraries of memsnap's C++ dependencies, which a program that
# links them in must not need (a wheel that forgot one would find it on this
# machine and pass). zlib and libstdc++ stay: Python itself loads them (its
# binascii and zlib modules, numpy); whether memsnap's own objects need them
# is read from their NEEDED entries instead (tests/dist/test_wheel.py).
HIDDEN_LIBRARY_PREFIXES = ("libabsl_", "libfmt.", "libre2.", "libzstd.", "libxxhash.", "libpugixml.",
                           "libtomlplusplus.", "libboost_", "libCLI11")
HIDDEN_PROGRAMS = ("cc", "c++", "gcc", "g++", "clang", "clang++", "cpp", "ld", "ld.bfd", "ld.gold",
                   "cmake", "ninja", "make", "pkg-config", "npm", "node", "zig", "ccache")
LIBRARY_FOLDERS = ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/local/lib")


def _namespace_prefix():
    """The command prefix that gives a new mount namespace, or None."""
    prefix = [] if os.geteuid() == 0 else ["-r"]
    probe = subprocess.run(["unshare", *prefix, "-m", "true"], capture_output=True)
    return ["unshare", *prefix, "-m"] if probe.returncode == 0 else None


def in_empty_root(root, argv, **kwargs):
    """Runs argv (paths inside root) chrooted into root with an empty
    environment; skips (exit 77) where neither root nor user namespaces allow it."""
    prefix = _namespace_prefix()
    if prefix is None or shutil.which("chroot") is None:
        testlib.skip_absent("a mount namespace (root, or user namespaces) to make an empty root")
    chroot = shutil.which("chroot")
    return subprocess.Popen([*prefix, chroot, root, *argv], env={}, **kwargs)


def hiding_script(command):
    """A shell script that hides the headers, compilers and the C++
    libraries of this machine (bind mounts, in the namespace it runs in),
    then execs command (a list), with an empty environment but PATH."""
    lines = ["set -eu", "mount -t tmpfs none /usr/include", "[ -d /usr/local/include ] && "
             "mount -t tmpfs none /usr/local/include || true"]
    for folder in LIBRARY_FOLDERS:
        if not os.path.isdir(folder) or os.path.islink(folder):
            continue
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name)
            if name.startswith(HIDDEN_LIBRARY_PREFIXES) and os.path.isfile(path):
                lines.append(f"mount --bind /dev/null '{path}'")
    for folder in ("/usr/bin", "/usr/local/bin", "/bin"):
        if os.path.islink(folder):
            continue
        for name in HIDDEN_PROGRAMS:
            path = os.path.join(folder, name)
            if os.path.exists(path) and not os.path.islink(path):
                lines.append(f"mount --bind /dev/null '{path}'")
            elif os.path.islink(path):
                target = os.path.realpath(path)
                if os.path.isfile(target):
                    lines.append(f"mount --bind /dev/null '{target}'")
    quoted = " ".join("'" + part.replace("'", "'\\''") + "'" for part in command)
    lines.append(f"exec env -i PATH=/usr/bin:/bin {quoted}")
    return "\n".join(lines)


def with_machine_hidden(command, **kwargs):
    """Runs command where this machine's headers, compilers and C++ libraries
    are out of reach; skips where no mount namespace can be made."""
    prefix = _namespace_prefix()
    if prefix is None:
        testlib.skip_absent("a mount namespace (root, or user namespaces) to hide the machine's libraries")
    return subprocess.run([*prefix, "sh", "-c", hiding_script(command)], **kwargs)
