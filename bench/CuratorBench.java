// Benchmark worker for Apache Curator (InterProcessMutex, with its ZooKeeper
// client), driven by the zklock bench orchestrator (bench/src/orch.rs); same
// command line, stages and JSON as every other worker (see bench/README.md):
//
//   java CuratorBench <mode> <connect string> <lock path> [name=value ...]
//
// One InterProcessMutex per contender. Measurements, not tests: nothing here
// asserts on timings.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.RetryNTimes;

public final class CuratorBench {
    private CuratorBench() {}

    static final BufferedReader IN = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));

    static void stage(String name) throws Exception {
        System.out.println("S " + name);
        System.out.flush();
        if (IN.readLine() == null) {
            throw new IllegalStateException("the orchestrator went away");
        }
    }

    static CuratorFramework connect(String connect) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(connect)
                .sessionTimeoutMs(30_000)
                .connectionTimeoutMs(15_000)
                .retryPolicy(new RetryNTimes(3, 100))
                .build();
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            throw new IllegalStateException("could not connect to " + connect);
        }
        return client;
    }

    static void cycle(InterProcessMutex m) throws Exception {
        m.acquire();
        m.release();
    }

    static int param(Map<String, String> p, String key, int dflt) {
        String v = p.get(key);
        return v == null ? dflt : Integer.parseInt(v);
    }

    static void uncontended(String connect, String path, Map<String, String> p, StringBuilder out) throws Exception {
        int cycles = param(p, "cycles", 1000);
        int warm = param(p, "warm", cycles / 2);
        CuratorFramework c = connect(connect);
        InterProcessMutex m = new InterProcessMutex(c, path);
        cycle(m);
        stage("rest");
        for (int i = 0; i < warm; i++) {
            cycle(m);
        }
        stage("ready");
        long[] lat = new long[cycles];
        for (int i = 0; i < cycles; i++) {
            long t = System.nanoTime();
            cycle(m);
            lat[i] = System.nanoTime() - t;
        }
        stage("done");
        out.append(",\"latencies_ns\":[");
        for (int i = 0; i < cycles; i++) {
            out.append(i > 0 ? "," : "").append(lat[i]);
        }
        out.append(']');
        c.close();
    }

    static void contended(String connect, String path, Map<String, String> p, StringBuilder out) throws Exception {
        int sessions = Math.max(1, param(p, "sessions", 8));
        int cycles = param(p, "cycles", 100);
        int warm = param(p, "warm", cycles / 4);
        long holdUs = param(p, "hold_us", 0);
        long t0 = System.nanoTime();
        List<CuratorFramework> clients = new ArrayList<>();
        for (int i = 0; i < sessions; i++) {
            clients.add(connect(connect));
        }
        CyclicBarrier warmed = new CyclicBarrier(sessions + 1);
        CyclicBarrier go = new CyclicBarrier(sessions + 1);
        AtomicInteger inside = new AtomicInteger();
        AtomicInteger overlaps = new AtomicInteger();
        AtomicReference<Exception> error = new AtomicReference<>();
        List<List<long[]>> records = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        for (int s = 0; s < sessions; s++) {
            final int id = s;
            final List<long[]> record = new ArrayList<>();
            records.add(record);
            final InterProcessMutex m = new InterProcessMutex(clients.get(s), path);
            Thread t = new Thread(() -> {
                try {
                    for (int round = 0; round < 2; round++) {
                        int n = round == 0 ? warm : cycles;
                        for (int i = 0; i < n && error.get() == null; i++) {
                            m.acquire();
                            long acquired = System.nanoTime() - t0;
                            if (inside.getAndIncrement() != 0) {
                                overlaps.incrementAndGet();
                            }
                            if (holdUs > 0) {
                                Thread.sleep(holdUs / 1000, (int) (holdUs % 1000) * 1000);
                            }
                            inside.decrementAndGet();
                            if (round == 1) {
                                record.add(new long[] {id, acquired, System.nanoTime() - t0});
                            }
                            m.release();
                        }
                        if (round == 0) {
                            warmed.await();
                            go.await();
                        }
                    }
                } catch (Exception e) {
                    error.compareAndSet(null, e);
                }
            });
            threads.add(t);
            t.start();
        }
        warmed.await();
        stage("ready");
        go.await();
        for (Thread t : threads) {
            t.join();
        }
        if (error.get() != null) {
            throw error.get();
        }
        stage("done");
        out.append(",\"timeline\":[");
        boolean first = true;
        for (List<long[]> rs : records) {
            for (long[] r : rs) {
                out.append(first ? "" : ",").append('[').append(r[0]).append(',').append(r[1]).append(',').append(r[2]).append(']');
                first = false;
            }
        }
        out.append("],\"overlaps_seen\":").append(overlaps.get());
        for (CuratorFramework c : clients) {
            c.close();
        }
    }

    static void waiters(String connect, String path, Map<String, String> p, StringBuilder out) throws Exception {
        int n = param(p, "waiters", 1000);
        int sessions = Math.max(1, param(p, "sessions", 10));
        CuratorFramework holder = connect(connect);
        InterProcessMutex held = new InterProcessMutex(holder, path);
        held.acquire();
        List<CuratorFramework> clients = new ArrayList<>();
        for (int i = 0; i < sessions; i++) {
            clients.add(connect(connect));
        }
        stage("ready");
        long t0 = System.nanoTime();
        AtomicLong last = new AtomicLong();
        AtomicInteger passed = new AtomicInteger();
        AtomicInteger errors = new AtomicInteger();
        AtomicReference<String> firstError = new AtomicReference<>("");
        // One thread per waiter.
        List<Thread> threads = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            final InterProcessMutex m = new InterProcessMutex(clients.get(i % sessions), path);
            Thread t = new Thread(() -> {
                try {
                    cycle(m);
                    passed.incrementAndGet();
                    last.accumulateAndGet(System.nanoTime() - t0, Math::max);
                } catch (Exception e) {
                    errors.incrementAndGet();
                    firstError.compareAndSet("", e.toString().replace('"', '\''));
                }
            });
            t.setDaemon(true);
            threads.add(t);
            t.start();
        }
        stage("queued");
        long released = System.nanoTime() - t0;
        held.release();
        for (Thread t : threads) {
            t.join();
        }
        stage("done");
        out.append(",\"pass_ns\":").append(Math.max(0, last.get() - released))
                .append(",\"passed\":").append(passed.get())
                .append(",\"errors\":").append(errors.get())
                .append(",\"first_error\":\"").append(firstError.get()).append('"');
        holder.close();
        for (CuratorFramework c : clients) {
            c.close();
        }
    }

    static void held(String connect, String path, Map<String, String> p, StringBuilder out) throws Exception {
        int count = param(p, "locks", 10000);
        CuratorFramework c = connect(connect);
        List<InterProcessMutex> locks = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            locks.add(new InterProcessMutex(c, path + "/l" + i));
        }
        stage("ready");
        long t = System.nanoTime();
        for (InterProcessMutex m : locks) {
            m.acquire();
        }
        long take = System.nanoTime() - t;
        stage("held");
        t = System.nanoTime();
        for (InterProcessMutex m : locks) {
            m.release();
        }
        long release = System.nanoTime() - t;
        stage("done");
        out.append(",\"take_ns\":").append(take).append(",\"release_ns\":").append(release);
        c.close();
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: CuratorBench <uncontended|contended|waiters|held> <connect> <path> [name=value ...]");
            System.exit(2);
        }
        Map<String, String> p = new HashMap<>();
        for (int i = 3; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq < 0) {
                System.err.println("parameter " + args[i] + " is not name=value");
                System.exit(2);
            }
            p.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        StringBuilder out = new StringBuilder("{\"impl\":\"curator\",\"mode\":\"" + args[0] + "\"");
        try {
            switch (args[0]) {
                case "uncontended": uncontended(args[1], args[2], p, out); break;
                case "contended": contended(args[1], args[2], p, out); break;
                case "waiters": waiters(args[1], args[2], p, out); break;
                case "held": held(args[1], args[2], p, out); break;
                default:
                    System.err.println("unknown mode " + args[0]);
                    System.exit(2);
            }
        } catch (Exception e) {
            e.printStackTrace();
            System.exit(1);
        }
        out.append('}');
        System.out.println(out);
        System.out.flush();
        System.exit(0);
    }
}
