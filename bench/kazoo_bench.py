#!/usr/bin/env python3
"""Benchmark worker for kazoo, driven by the zklock bench orchestrator
(bench/src/orch.rs); same command line, stages and JSON as every other worker
(see bench/README.md):

  kazoo_bench.py <mode> <connect string> <lock path> [name=value ...]

Locks are kazoo's own recipe, `KazooClient.Lock`, one Lock object per
contender. Measurements, not tests: nothing here asserts on timings.
"""

import json
import logging
import sys
import threading
import time

from kazoo.client import KazooClient

SESSION_TIMEOUT_S = 30.0


def stage(name):
    sys.stdout.write("S %s\n" % name)
    sys.stdout.flush()
    if not sys.stdin.readline():
        raise RuntimeError("the orchestrator went away")


def connect(hosts):
    zk = KazooClient(hosts=hosts, timeout=SESSION_TIMEOUT_S)
    zk.start(timeout=30)
    return zk


def close(zk):
    zk.stop()
    zk.close()


def cycle(lock):
    lock.acquire()
    lock.release()


def uncontended(hosts, path, p, out):
    cycles = int(p.get("cycles", 1000))
    warm = int(p.get("warm", cycles // 2))
    zk = connect(hosts)
    lock = zk.Lock(path, "bench")
    cycle(lock)
    stage("rest")
    for _ in range(warm):
        cycle(lock)
    stage("ready")
    lat = []
    clock = time.perf_counter_ns
    for _ in range(cycles):
        t = clock()
        cycle(lock)
        lat.append(clock() - t)
    stage("done")
    out["latencies_ns"] = lat
    close(zk)


def contended(hosts, path, p, out):
    sessions = max(1, int(p.get("sessions", 8)))
    cycles = int(p.get("cycles", 100))
    warm = int(p.get("warm", cycles // 4))
    hold_s = int(p.get("hold_us", 0)) / 1e6
    t0 = time.monotonic_ns()
    clients = [connect(hosts) for _ in range(sessions)]
    warmed = threading.Barrier(sessions + 1)
    go = threading.Barrier(sessions + 1)
    state = {"inside": 0, "overlaps": 0}
    guard = threading.Lock()
    records = [[] for _ in range(sessions)]
    errors = []

    def turn(lock, ident, record):
        lock.acquire()
        acquired = time.monotonic_ns() - t0
        with guard:
            if state["inside"] != 0:
                state["overlaps"] += 1
            state["inside"] += 1
        if hold_s > 0:
            time.sleep(hold_s)
        with guard:
            state["inside"] -= 1
        if record is not None:
            record.append([ident, acquired, time.monotonic_ns() - t0])
        lock.release()

    def session(ident):
        lock = clients[ident].Lock(path, "s%d" % ident)
        try:
            for _ in range(warm):
                turn(lock, ident, None)
        except Exception as exc:  # reported after the barriers
            errors.append(exc)
        warmed.wait()
        go.wait()
        try:
            if not errors:
                for _ in range(cycles):
                    turn(lock, ident, records[ident])
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=session, args=(i,)) for i in range(sessions)]
    for t in threads:
        t.start()
    warmed.wait()
    stage("ready")
    go.wait()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    stage("done")
    out["timeline"] = [r for rs in records for r in rs]
    out["overlaps_seen"] = state["overlaps"]
    for zk in clients:
        close(zk)


def waiters(hosts, path, p, out):
    n = int(p.get("waiters", 1000))
    sessions = max(1, int(p.get("sessions", 10)))
    holder = connect(hosts)
    held = holder.Lock(path, "holder")
    held.acquire()
    clients = [connect(hosts) for _ in range(sessions)]
    stage("ready")
    t0 = time.monotonic_ns()
    guard = threading.Lock()
    state = {"passed": 0, "last": 0, "errors": 0, "first_error": ""}

    def waiter(i):
        try:
            cycle(clients[i % sessions].Lock(path, "w%d" % i))
            done = time.monotonic_ns() - t0
            with guard:
                state["passed"] += 1
                state["last"] = max(state["last"], done)
        except Exception as exc:
            with guard:
                state["errors"] += 1
                state["first_error"] = state["first_error"] or repr(exc)

    # One thread per waiter.
    threads = [threading.Thread(target=waiter, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    stage("queued")
    released = time.monotonic_ns() - t0
    held.release()
    for t in threads:
        t.join()
    stage("done")
    out["pass_ns"] = max(0, state["last"] - released)
    out["passed"] = state["passed"]
    out["errors"] = state["errors"]
    out["first_error"] = state["first_error"]
    close(holder)
    for zk in clients:
        close(zk)


def held(hosts, path, p, out):
    count = int(p.get("locks", 10000))
    zk = connect(hosts)
    locks = [zk.Lock("%s/l%d" % (path, i), "bench") for i in range(count)]
    stage("ready")
    t = time.perf_counter_ns()
    for lock in locks:
        lock.acquire()
    out["take_ns"] = time.perf_counter_ns() - t
    stage("held")
    t = time.perf_counter_ns()
    for lock in locks:
        lock.release()
    out["release_ns"] = time.perf_counter_ns() - t
    stage("done")
    close(zk)


MODES = {
    "uncontended": uncontended,
    "contended": contended,
    "waiters": waiters,
    "held": held,
}


def main():
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if len(sys.argv) < 4 or sys.argv[1] not in MODES:
        sys.stderr.write("usage: kazoo_bench.py <%s> <connect> <path> [name=value ...]\n" % "|".join(MODES))
        sys.exit(2)
    mode, hosts, path = sys.argv[1:4]
    params = dict(a.split("=", 1) for a in sys.argv[4:])
    out = {"impl": "kazoo", "mode": mode}
    MODES[mode](hosts, path, params, out)
    sys.stdout.write(json.dumps(out, separators=(",", ":")) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
