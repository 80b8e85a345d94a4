#!/usr/bin/env python3
"""memsnap serve against local peers without the token: what each attack
costs the server (peak RSS, growth over its start) and whether whoever has
the token is still answered. Run it on two binaries to compare them.

    python3 bench/serve_attack_bench.py --memsnap build/memsnap [--label after]

The attacks (each on a fresh server of the bundled example):
  line      a request line with no end, 515 MiB offered on one connection
  headers   512 header lines of 8 KiB after a request line (4 MiB)
  gigabyte  16 peers offering 64 MiB each at once, half as a request line,
            half as 8 KiB headers, reconnecting when refused
  idle      256 idle and 64 slow sockets (a byte every 0.5 s) held while a
            holder of the token asks 5 times (answers within 30 s counted)

Standard library only (the socket helpers are the hostile test's). A
benchmark, not a test: it prints one Markdown row per attack and exits 0.
"""
import argparse
import os
import resource
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "serve"))

import test_serve_hostile as peers  # noqa: E402
from test_serve import A, Served  # noqa: E402


def peak_mib(pid):
    """The process's peak RSS so far (VmHWM), or None once it is gone."""
    try:
        with open("/proc/%d/status" % pid) as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def one_peer(served, opening, piece, most):
    """Offers `most` bytes on one connection; the bytes taken."""
    try:
        with peers.connect(served) as sock:
            sock.sendall(opening)
            return len(opening) + peers.send_until_refused(sock, piece, most)
    except OSError:
        return 0


def attack_line(served):
    return one_peer(served, b"GET /", b"a" * (1 << 20), 515 << 20)


def attack_headers(served):
    return one_peer(served, b"GET /api/files HTTP/1.1\r\n", (b"X: " + b"y" * 8186 + b"\r\n") * 8, 4 << 20)


def attack_gigabyte(served):
    offered = []

    def peer(shape):
        total = 0
        while total < 64 << 20:
            opening = b"GET /" if shape else b"GET / HTTP/1.1\r\n"
            piece = b"a" * (256 << 10) if shape else (b"X: " + b"y" * 8186 + b"\r\n") * 32
            taken = one_peer(served, opening, piece, (64 << 20) - total)
            total += max(taken, len(piece))
        offered.append(total)

    threads = [threading.Thread(target=peer, args=(i % 2,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    return sum(offered)


def attack_idle(served):
    idle = [peers.connect(served) for _ in range(256)]
    slow = [peers.connect(served) for _ in range(64)]
    stop = threading.Event()

    def drip():
        while not stop.wait(0.5):
            for sock in slow:
                try:
                    sock.send(b"G")
                except OSError:
                    pass

    dripping = threading.Thread(target=drip)
    dripping.start()
    answered, slowest = 0, 0.0
    for _ in range(5):
        start = time.monotonic()
        try:
            if served.get("/api/files")[0] == 200:
                answered += 1
        except OSError:
            pass
        slowest = max(slowest, time.monotonic() - start)
    stop.set()
    dripping.join()
    for sock in idle + slow:
        sock.close()
    return "%d of 5 answered, slowest %.2f s" % (answered, slowest)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memsnap", required=True)
    parser.add_argument("--label", default="")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    print("| binary | attack | sent (until refused) | time | server peak RSS (start) | holder after | server |")
    print("|---|---|---|---|---|---|---|")
    for name, attack in (("line", attack_line), ("headers", attack_headers),
                         ("gigabyte", attack_gigabyte), ("idle", attack_idle)):
        served = Served(args.memsnap, files=(A,))
        start_mib = peak_mib(served.process.pid)
        begun = time.monotonic()
        offered = attack(served)
        took = time.monotonic() - begun
        peak = peak_mib(served.process.pid)
        alive = served.process.poll() is None
        holder = peers.holder_answered_within(served, 1) if alive else False
        print("| %s | %s | %s | %.1f s | %s (%.0f MiB) | %s | %s |" % (
            args.label, name,
            offered if isinstance(offered, str) else "%.0f MiB" % (offered / (1 << 20)), took,
            "%.0f MiB" % peak if peak is not None else "gone", start_mib,
            "answered within 1 s" if holder else "not answered",
            "running" if alive else "died (exit %s)" % served.process.returncode))
        if alive:
            served.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
