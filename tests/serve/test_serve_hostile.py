#!/usr/bin/env python3
"""`memsnap serve` against local peers that have no token (docs/safety.md,
"The server"): a request line that never ends, endless or too many headers,
a gigabyte sent by sixteen peers at once, and hundreds of idle and slow
sockets. The server's memory stays bounded, each is refused with its own
status, and whoever has the token is answered within a second throughout.
Loopback traffic only; every loop is bounded in bytes and in time. Skips
(exit 77) where the build has no server."""
import json
import os
import resource
import signal
import socket
import subprocess
import threading
import time

import pytest

from test_serve import A, Served

# What the server may grow by while a gigabyte is sent at it (docs/safety.md
# states the bound: 1,024 connections, each holding at most a 16 KiB head).
GROWTH_BOUND_MIB = 48


@pytest.fixture(scope="module")
def served(memsnap):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    server = Served(memsnap, files=(A,))
    yield server
    assert server.stop() == 0, "memsnap serve did not stop cleanly on SIGINT"


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS for %d" % pid)


def connect(served):
    return socket.create_connection(("127.0.0.1", served.port), timeout=10)


def answer_of(sock, most=1 << 16):
    """What the server sends until it closes (or `most` bytes, or 10 s)."""
    got = b""
    deadline = time.monotonic() + 10
    while len(got) < most and time.monotonic() < deadline:
        try:
            part = sock.recv(4096)
        except (ConnectionResetError, socket.timeout):
            break
        if not part:
            break
        got += part
    return got


def status_and_body(answer):
    """(status, body) of an answer; (0, b"") where none came."""
    if not answer.startswith(b"HTTP/1.1 "):
        return 0, b""
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def send_until_refused(sock, piece, most):
    """Sends `piece` until the server refuses more or `most` bytes went."""
    sent = 0
    try:
        while sent < most:
            sock.sendall(piece)
            sent += len(piece)
    except (BrokenPipeError, ConnectionResetError, socket.timeout):
        pass
    return sent


def holder_answered_within(served, seconds):
    """Whether a request with the token is answered 200 within `seconds`."""
    start = time.monotonic()
    try:
        status, _, _ = served.get("/api/files")
    except OSError:
        return False
    return status == 200 and time.monotonic() - start < seconds


def test_a_request_line_without_its_end_is_414_as_it_arrives(served):
    with connect(served) as sock:
        sock.sendall(b"GET /" + b"a" * 9000)  # no newline, and none will come
        status, body = status_and_body(answer_of(sock))
    assert status == 414
    assert json.loads(body)["code"] == "bad_request"
    assert "8192 bytes" in json.loads(body)["error"]  # the limit it passed
    assert holder_answered_within(served, 1)


def test_headers_are_bounded_in_size_and_in_number(served):
    def with_headers(count):
        extra = {"X-%d" % i: "y" for i in range(count)}
        return served.get("/api/files", extra)[0]

    # Host and 63 more: the most a head may have.
    assert with_headers(63) == 200
    assert with_headers(64) == 431
    assert with_headers(120) == 431
    with connect(served) as sock:
        sock.sendall(b"GET /api/files HTTP/1.1\r\n")
        send_until_refused(sock, b"X: " + b"y" * 8192 + b"\r\n", 64 << 20)
        status, body = status_and_body(answer_of(sock))
    assert status == 431 and json.loads(body)["code"] == "bad_request"
    assert "16384 bytes" in json.loads(body)["error"]  # the limit it passed


def test_a_gigabyte_sent_before_the_token_is_held_in_bounded_memory(served):
    pid = served.process.pid
    baseline = rss_mib(pid)
    peak = [baseline]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss_mib(pid))
            time.sleep(0.01)

    offered = []

    def attack(shape):
        # 64 MiB per peer, on new connections as each is refused.
        total = 0
        while total < 64 << 20:
            with connect(served) as sock:
                opening = b"GET /" if shape == "line" else b"GET / HTTP/1.1\r\n"
                piece = b"a" * (256 << 10) if shape == "line" else (b"X: " + b"y" * 8186 + b"\r\n") * 32
                sock.sendall(opening)
                total += len(opening) + send_until_refused(sock, piece, (64 << 20) - total)
        offered.append(total)

    sampler = threading.Thread(target=sample)
    sampler.start()
    peers = [threading.Thread(target=attack, args=("line" if i % 2 else "headers",))
             for i in range(16)]
    for peer in peers:
        peer.start()
    answered = [holder_answered_within(served, 1)]
    for peer in peers:
        peer.join(timeout=120)
    done.set()
    sampler.join()
    assert sum(offered) >= 1 << 30, sum(offered)
    # ASan keeps freed memory in quarantine: there the growth says nothing
    # of the server's own bound (the attack and the answers are still held).
    if os.environ.get("MEMSNAP_SANITIZED") != "1":
        assert peak[0] - baseline < GROWTH_BOUND_MIB, (baseline, peak[0])
    answered.append(holder_answered_within(served, 1))
    assert all(answered), answered


def test_a_token_holder_is_answered_while_slow_and_idle_peers_are_held(served):
    idle = [connect(served) for _ in range(256)]
    slow = [connect(served) for _ in range(64)]
    stop = threading.Event()

    def drip():
        # One byte of a request head every half second on each slow socket.
        for byte in b"GET /api/files HTTP/1.1\r\nHost: x\r\n":
            if stop.wait(0.5):
                return
            for sock in slow:
                try:
                    sock.send(bytes([byte]))
                except OSError:
                    pass

    dripping = threading.Thread(target=drip)
    dripping.start()
    try:
        times = []
        for _ in range(5):
            start = time.monotonic()
            assert holder_answered_within(served, 1)
            times.append(time.monotonic() - start)
            time.sleep(0.2)
        assert max(times) < 1, times
    finally:
        stop.set()
        dripping.join()
        for sock in idle + slow:
            sock.close()
    assert holder_answered_within(served, 1)


@pytest.mark.parametrize("token", ["a&b=c", "%41", "a+b", "a#b", "sp ace/?=&%"])
def test_a_token_of_any_characters_works_in_the_printed_address(memsnap, token):
    server = Served(memsnap, "--token", token, files=(A,))
    try:
        # The printed address, as a browser would send it.
        assert server.token == token, server.url
        path = "/api/files?" + server.url.query
        status, _, _ = server.get(path, token=False)
        assert status == 200, (token, server.url.geturl())
        stderr = ""
    finally:
        assert server.stop() == 0
        stderr = server.process.stderr.read()
    assert "--token has %d characters" % len(token) in stderr, stderr


def test_routes_of_the_whole_server_refuse_unknown_parameters(served):
    for route in ("/api/files", "/api/reports", "/api/ranks"):
        status, _, body = served.get(route + "?nothing=1")
        assert status == 400, (route, status)
        assert json.loads(body)["code"] == "bad_parameter"
        assert served.get(route)[0] == 200


def test_ctrl_c_stops_cleanly_right_after_the_address_and_ends_a_load(memsnap):
    # Right after the address is printed: a clean stop, every time (a thread
    # made while loading once took the signal with its default action).
    for _ in range(10):
        server = Served(memsnap, files=(A,))
        assert server.stop() == 0
    # While the file is still being read (a pipe that sends nothing): the
    # signal ends the command as it would any other.
    loading = subprocess.Popen([memsnap, "serve", "-"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        time.sleep(0.5)
        loading.send_signal(signal.SIGINT)
        assert loading.wait(timeout=10) == -signal.SIGINT
    finally:
        loading.kill()
        loading.wait()
