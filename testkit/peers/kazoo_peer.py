#!/usr/bin/env python3
"""Interoperability peer: drives real kazoo lock recipes over a line protocol
so zklock's integration tests can make kazoo contend with our library (and
with Curator) for the same locks.

Usage: kazoo_peer.py <connect_string> <lock_path> <kind> <id>
  kind: mutex  -> kazoo Lock with extra_lock_patterns=["-lock-"]: kazoo waits for
                  Curator InterProcessMutex nodes, but its own nodes are named
                  <uuid32>__lock__<seq>, which Curator 5.4 does NOT recognise
                  (Curator sorts by the text after the last "lock-", so these
                  sort after all of its own nodes and Curator ignores them).
        mutex-curator -> the same kazoo Lock class, but naming its nodes
                  <uuid32>-lock-<seq> so Curator also sees them: mutual exclusion
                  in both directions.
        read   -> kazoo ReadLock  (kazoo-native naming, not Curator compatible)
        write  -> kazoo WriteLock (kazoo-native naming, not Curator compatible)

stdout (one line each, flushed):
  ready                               connected, commands accepted
  acquired <node-name> <unix_millis>  lock held (millis taken right after acquisition)
  timeout                             "acquire <ms>" gave up, nothing held or queued
  released <unix_millis>              lock released (millis taken right BEFORE releasing)
  children <a,b,c>                    sorted child names of lock_path (empty if none)
  error <message>                     command failed; the peer keeps going
stdin commands: acquire | acquire <timeout_ms> | release | children | quit
quit or EOF on stdin: release whatever is held, close the client, exit 0.
"""

import logging
import os
import queue
import sys
import threading
import time

try:
    from kazoo.client import KazooClient
    from kazoo.exceptions import LockTimeout, NoNodeError
    from kazoo.recipe.lock import Lock
except ImportError as exc:  # pragma: no cover - reported to the Rust side
    sys.stdout.write("error kazoo is not importable: %s\n" % exc)
    sys.stdout.flush()
    sys.exit(3)

QUIT = object()
_out_lock = threading.Lock()


def emit(line):
    with _out_lock:
        sys.stdout.write(line.replace("\n", " ").replace("\r", " ") + "\n")
        sys.stdout.flush()


def now_millis():
    return int(time.time() * 1000)


def describe(exc):
    text = str(exc)
    return type(exc).__name__ + (": " + text if text else "")


class CuratorNamedLock(Lock):
    """kazoo's Lock, with the node name part Curator's InterProcessMutex uses."""

    _NODE_NAME = "-lock-"


def make_lock(zk, path, kind, ident):
    if kind == "mutex":
        return zk.Lock(path, ident, extra_lock_patterns=["-lock-"])
    if kind == "mutex-curator":
        return CuratorNamedLock(zk, path, ident, extra_lock_patterns=["-lock-"])
    if kind == "read":
        return zk.ReadLock(path, ident)
    if kind == "write":
        return zk.WriteLock(path, ident)
    raise ValueError("unknown lock kind '%s' (kazoo peer supports mutex, mutex-curator, read, write)" % kind)


class Worker(threading.Thread):
    """Runs acquire/release one at a time, off the stdin-reading thread."""

    def __init__(self, lock):
        super().__init__(name="kazoo-peer-worker", daemon=True)
        self.lock = lock
        self.queue = queue.Queue()
        self.held = False
        self.acquiring = False

    def submit(self, command):
        self.queue.put(command)

    def shutdown(self):
        self.queue.put(QUIT)
        if self.acquiring:
            self.lock.cancel()

    def run(self):
        while True:
            command = self.queue.get()
            if command is QUIT:
                if self.held:
                    try:
                        self.lock.release()
                    except Exception:  # the session is closed next anyway
                        pass
                    self.held = False
                return
            self.handle(command)

    def handle(self, command):
        parts = command.split()
        try:
            if parts[0] == "acquire":
                if len(parts) > 2:
                    emit("error usage: acquire [timeout_ms]")
                    return
                timeout = int(parts[1]) / 1000.0 if len(parts) == 2 else None
                if self.held:
                    emit("error already held")
                    return
                self.acquiring = True
                try:
                    try:
                        got = self.lock.acquire(blocking=True, timeout=timeout)
                    except LockTimeout:
                        got = False
                finally:
                    self.acquiring = False
                stamp = now_millis()
                if got:
                    self.held = True
                    emit("acquired %s %d" % (self.lock.node or "", stamp))
                else:
                    emit("timeout")
            elif parts[0] == "release":
                if not self.held:
                    emit("error not held")
                    return
                stamp = now_millis()
                self.held = False
                self.lock.release()
                emit("released %d" % stamp)
            else:
                emit("error unknown command '%s'" % command)
        except Exception as exc:
            emit("error %s: %s" % (parts[0], describe(exc)))


def children(zk, path):
    try:
        return "children " + ",".join(sorted(zk.get_children(path)))
    except NoNodeError:
        return "children "
    except Exception as exc:
        return "error children: " + describe(exc)


def main(argv):
    if len(argv) != 5:
        emit("error usage: kazoo_peer.py <connect_string> <lock_path> <kind> <id>")
        return 2
    connect, path, kind, ident = argv[1:5]
    logging.basicConfig(level=logging.CRITICAL, stream=sys.stderr)

    zk = KazooClient(hosts=connect, timeout=10.0)
    try:
        lock = make_lock(zk, path, kind, ident)
    except ValueError as exc:
        emit("error %s" % exc)
        return 2
    try:
        zk.start(timeout=30)
    except Exception as exc:
        emit("error could not connect to %s: %s" % (connect, describe(exc)))
        return 1

    worker = Worker(lock)
    worker.start()
    emit("ready")

    while True:
        line = sys.stdin.readline()
        if not line:
            break
        command = line.strip()
        if not command:
            continue
        if command == "quit":
            break
        if command == "children":
            emit(children(zk, path))
            continue
        worker.submit(command)

    worker.shutdown()
    worker.join(5.0)
    try:
        zk.stop()
        zk.close()
    except Exception:
        pass
    return 0


if __name__ == "__main__":
    code = main(sys.argv)
    sys.stdout.flush()
    # Skip interpreter teardown: kazoo's handler threads must not keep us alive.
    os._exit(code)
