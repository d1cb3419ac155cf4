#!/usr/bin/env python3
"""Benchmark worker for kazoo, driven by examples/bench.rs. Mirrors the zklock
worker phase for phase and prints the same `R <phase>.<key> <value>` lines.

  kazoo_bench.py worker  <connect> <mntr host:port> <N> <M> <K> <threads>
  kazoo_bench.py handoff <connect> <lock path> <H> <warm-up> <hold ms> <id>

Measurements, not tests: nothing here asserts on timings.
"""

import logging
import os
import socket
import sys
import time

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

SETTLE_S = 0.2
MNTR_ADDR = None
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_ns():
    """CPU of the whole process (every thread), CLOCK_PROCESS_CPUTIME_ID."""
    return time.process_time_ns()


def ticks():
    with open("/proc/self/stat") as f:
        s = f.read()
    fields = s[s.rindex(")") + 2:].split()
    return int(fields[11]) + int(fields[12])


def status_kb(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def mntr():
    out = {}
    try:
        with socket.create_connection(MNTR_ADDR, timeout=5) as s:
            s.sendall(b"mntr")
            buf = b""
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                buf += chunk
        for line in buf.decode("utf-8", "replace").splitlines():
            kv = line.split()
            if len(kv) >= 2:
                try:
                    out[kv[0]] = float(kv[1])
                except ValueError:
                    pass
    except OSError:
        pass
    return out


def put(key, value):
    sys.stdout.write("R %s %r\n" % (key, float(value)))


def begin():
    m = mntr()
    return {
        "packets": m.get("zk_packets_received", float("nan")),
        "watches": m.get("zk_watch_count", float("nan")),
        "rss": status_kb("VmRSS"),
        "ticks": ticks(),
        "cpu": cpu_ns(),
        "wall": time.perf_counter_ns(),
    }


def end(phase, ops, b, lat_ns=None):
    wall = time.perf_counter_ns() - b["wall"]
    cpu = cpu_ns() - b["cpu"]
    tk = ticks() - b["ticks"]
    rss = status_kb("VmRSS")
    time.sleep(SETTLE_S)
    m = mntr()
    packets = m.get("zk_packets_received", float("nan"))
    watches = m.get("zk_watch_count", float("nan"))
    put(phase + ".ops", ops)
    put(phase + ".wall_s", wall / 1e9)
    put(phase + ".ops_per_s", ops / (wall / 1e9))
    put(phase + ".cpu_us_per_op", cpu / 1e3 / ops)
    put(phase + ".cpu_ticks_us_per_op", tk * 1e6 / CLK_TCK / ops)
    # the mntr that reads the counter is itself one received packet
    put(phase + ".packets_per_op", (packets - b["packets"] - 1) / ops)
    put(phase + ".watches_left", watches - b["watches"])
    put(phase + ".rss_growth_kb", rss - b["rss"])
    if lat_ns:
        s = sorted(lat_ns)
        n = len(s)
        put(phase + ".mean_us", sum(s) / n / 1e3)
        put(phase + ".p50_us", s[min(n - 1, n * 50 // 100)] / 1e3)
        put(phase + ".p99_us", s[min(n - 1, n * 99 // 100)] / 1e3)
    sys.stdout.flush()


def connect(hosts):
    zk = KazooClient(hosts=hosts, timeout=30.0)
    zk.start(timeout=30)
    return zk


def ensure(zk, path, data=b""):
    try:
        zk.create(path, data)
    except NodeExistsError:
        pass


def rt_loop(zk, path, n):
    lat = []
    clock = time.perf_counter_ns
    for _ in range(n):
        t = clock()
        zk.create(path, b"")
        zk.delete(path)
        lat.append(clock() - t)
    return lat


def pipe_loop(zk, path, m):
    """m get_async requests, then wait for every reply."""
    pending = [zk.get_async(path) for _ in range(m)]
    for p in pending:
        p.get(timeout=120)


def lock_loop(lock, k):
    lat = []
    clock = time.perf_counter_ns
    for _ in range(k):
        t = clock()
        lock.acquire()
        lock.release()
        lat.append(clock() - t)
    return lat


def worker(args):
    global MNTR_ADDR
    hosts, addr, n, m, k = args[0], args[1], int(args[2]), int(args[3]), int(args[4])
    host, port = addr.rsplit(":", 1)
    MNTR_ADDR = (host, int(port))

    zk = connect(hosts)
    base = "/bench/kazoo"
    ensure(zk, "/bench")
    ensure(zk, base)
    data = base + "/data"
    ensure(zk, data, b"\x07" * 32)
    rt = base + "/rt"
    try:
        zk.delete(rt)
    except NoNodeError:
        pass
    lock_path = base + "/lock"
    ensure(zk, lock_path)
    lock = zk.Lock(lock_path, "bench")

    # Warm-up pass: half of every measured loop, not measured.
    rt_loop(zk, rt, n // 2)
    pipe_loop(zk, data, m // 2)
    lock_loop(lock, k // 2)

    b = begin()
    lat = rt_loop(zk, rt, n)
    end("rt", n, b, lat)

    b = begin()
    pipe_loop(zk, data, m)
    end("pipe", m, b)

    b = begin()
    lat = lock_loop(lock, k)
    end("lock", k, b, lat)

    zk.stop()
    zk.close()
    put("rss_hwm_kb", status_kb("VmHWM"))
    put("rss_end_kb", status_kb("VmRSS"))
    sys.stdout.flush()


def handoff(args):
    hosts, path, h, warm = args[0], args[1], int(args[2]), int(args[3])
    hold_s, ident = int(args[4]) / 1000.0, args[5]
    zk = connect(hosts)
    ensure(zk, "/bench")
    ensure(zk, path)
    warm_path = "%s-warm-%s" % (path, ident)
    ensure(zk, warm_path)
    lock_loop(zk.Lock(warm_path, ident), warm)
    lock = zk.Lock(path, ident)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    sys.stdin.readline()
    acquired = []
    released = []
    for _ in range(h):
        lock.acquire()
        acquired.append(time.time_ns())
        # hold long enough for the other process to queue behind us
        time.sleep(hold_s)
        released.append(time.time_ns())
        lock.release()
    sys.stdout.write("".join("H %d %d\n" % (a, r) for a, r in zip(acquired, released)))
    zk.stop()
    zk.close()
    sys.stdout.write("done\n")
    sys.stdout.flush()


def main():
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if len(sys.argv) < 2 or sys.argv[1] not in ("worker", "handoff"):
        sys.stdout.write("error usage: kazoo_bench.py worker|handoff ...\n")
        sys.exit(2)
    try:
        (worker if sys.argv[1] == "worker" else handoff)(sys.argv[2:])
    except Exception as exc:  # reported to the orchestrator
        sys.stdout.write("error %s: %s\n" % (type(exc).__name__, exc))
        sys.stdout.flush()
        raise


if __name__ == "__main__":
    main()
