// Benchmark worker for Apache Curator (with its ZooKeeper client), driven by
// examples/bench.rs. Mirrors the zklock worker phase for phase and prints the
// same `R <phase>.<key> <value>` lines.
//
//   java CuratorBench worker  <connect> <mntr host:port> <N> <M> <K> <threads>
//   java CuratorBench handoff <connect> <lock path> <H> <warm-up> <hold ms> <id>
//
// Measurements, not tests: nothing here asserts on timings.

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Instant;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.api.BackgroundCallback;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.RetryNTimes;
import org.apache.zookeeper.KeeperException;

public final class CuratorBench {
    private CuratorBench() {}

    static final long SETTLE_MS = 200;
    static InetSocketAddress mntrAddr;

    // ----------------------------------------------------------- readings

    /** CPU of every live thread (JIT and GC threads included), ns, from /proc/self/task/N/schedstat. */
    static long cpuNs() {
        long sum = 0;
        File[] tasks = new File("/proc/self/task").listFiles();
        if (tasks == null) {
            return 0;
        }
        for (File t : tasks) {
            try {
                String s = new String(Files.readAllBytes(Paths.get(t.getPath(), "schedstat")), StandardCharsets.US_ASCII);
                sum += Long.parseLong(s.trim().split("\\s+")[0]);
            } catch (Exception e) {
                // the thread ended while we listed it
            }
        }
        return sum;
    }

    /** utime + stime of the whole process in clock ticks (/proc/self/stat). */
    static long ticks() {
        try {
            String s = new String(Files.readAllBytes(Paths.get("/proc/self/stat")), StandardCharsets.US_ASCII);
            String[] f = s.substring(s.lastIndexOf(')') + 2).split(" ");
            return Long.parseLong(f[11]) + Long.parseLong(f[12]);
        } catch (Exception e) {
            return 0;
        }
    }

    static long statusKb(String key) {
        try {
            for (String l : Files.readAllLines(Paths.get("/proc/self/status"))) {
                if (l.startsWith(key + ":")) {
                    return Long.parseLong(l.substring(key.length() + 1).trim().split("\\s+")[0]);
                }
            }
        } catch (Exception e) {
            // fall through
        }
        return 0;
    }

    static Map<String, Double> mntr() {
        Map<String, Double> m = new HashMap<>();
        try (Socket s = new Socket()) {
            s.connect(mntrAddr, 2000);
            s.setSoTimeout(5000);
            OutputStream out = s.getOutputStream();
            out.write("mntr".getBytes(StandardCharsets.US_ASCII));
            out.flush();
            InputStream in = s.getInputStream();
            ByteArrayOutputStream buf = new ByteArrayOutputStream();
            byte[] b = new byte[4096];
            int n;
            while ((n = in.read(b)) > 0) {
                buf.write(b, 0, n);
            }
            for (String l : buf.toString(StandardCharsets.UTF_8).split("\n")) {
                String[] kv = l.trim().split("\\s+");
                if (kv.length >= 2) {
                    try {
                        m.put(kv[0], Double.parseDouble(kv[1]));
                    } catch (NumberFormatException e) {
                        // a text value
                    }
                }
            }
        } catch (Exception e) {
            // no counters: NaN below
        }
        return m;
    }

    static final class Snap {
        long wallNs;
        long cpuNs;
        long ticks;
        double packets;
        double watches;
        long rssKb;
    }

    static Snap begin() {
        Snap s = new Snap();
        Map<String, Double> m = mntr();
        s.packets = m.getOrDefault("zk_packets_received", Double.NaN);
        s.watches = m.getOrDefault("zk_watch_count", Double.NaN);
        s.rssKb = statusKb("VmRSS");
        s.ticks = ticks();
        s.cpuNs = cpuNs();
        s.wallNs = System.nanoTime();
        return s;
    }

    static void put(String key, double v) {
        System.out.println("R " + key + " " + v);
    }

    static void end(String phase, int ops, Snap b, long[] latNs) throws InterruptedException {
        long wall = System.nanoTime() - b.wallNs;
        long cpu = cpuNs() - b.cpuNs;
        long ticks = ticks() - b.ticks;
        long rss = statusKb("VmRSS");
        Thread.sleep(SETTLE_MS);
        Map<String, Double> m = mntr();
        double packets = m.getOrDefault("zk_packets_received", Double.NaN);
        double watches = m.getOrDefault("zk_watch_count", Double.NaN);
        put(phase + ".ops", ops);
        put(phase + ".wall_s", wall / 1e9);
        put(phase + ".ops_per_s", ops / (wall / 1e9));
        put(phase + ".cpu_us_per_op", cpu / 1e3 / ops);
        put(phase + ".cpu_ticks_us_per_op", ticks * 1e6 / 100.0 / ops);
        // the mntr that reads the counter is itself one received packet
        put(phase + ".packets_per_op", (packets - b.packets - 1) / ops);
        put(phase + ".watches_left", watches - b.watches);
        put(phase + ".rss_growth_kb", (double) (rss - b.rssKb));
        if (latNs != null && latNs.length > 0) {
            long[] s = latNs.clone();
            Arrays.sort(s);
            double sum = 0;
            for (long v : s) {
                sum += v;
            }
            int n = s.length;
            put(phase + ".mean_us", sum / n / 1e3);
            put(phase + ".p50_us", s[Math.min(n - 1, n * 50 / 100)] / 1e3);
            put(phase + ".p99_us", s[Math.min(n - 1, n * 99 / 100)] / 1e3);
        }
        System.out.flush();
    }

    // ----------------------------------------------------------- loops

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

    static void ensure(CuratorFramework c, String path, byte[] data) throws Exception {
        try {
            c.create().forPath(path, data);
        } catch (KeeperException.NodeExistsException e) {
            // already there
        }
    }

    static long[] rtLoop(CuratorFramework c, String path, int n) throws Exception {
        long[] lat = new long[n];
        byte[] empty = new byte[0];
        for (int i = 0; i < n; i++) {
            long t = System.nanoTime();
            c.create().forPath(path, empty);
            c.delete().forPath(path);
            lat[i] = System.nanoTime() - t;
        }
        return lat;
    }

    /** m getData requests in the background (async), then wait for every reply. */
    static void pipeLoop(CuratorFramework c, String path, int m) throws Exception {
        CountDownLatch done = new CountDownLatch(m);
        AtomicInteger errors = new AtomicInteger();
        BackgroundCallback cb = (client, event) -> {
            if (event.getResultCode() != 0) {
                errors.incrementAndGet();
            }
            done.countDown();
        };
        for (int i = 0; i < m; i++) {
            c.getData().inBackground(cb).forPath(path);
        }
        if (!done.await(120, TimeUnit.SECONDS)) {
            throw new IllegalStateException("pipelined reads did not finish");
        }
        if (errors.get() > 0) {
            throw new IllegalStateException(errors.get() + " pipelined reads failed");
        }
    }

    static long[] lockLoop(InterProcessMutex mutex, int k) throws Exception {
        long[] lat = new long[k];
        for (int i = 0; i < k; i++) {
            long t = System.nanoTime();
            mutex.acquire();
            mutex.release();
            lat[i] = System.nanoTime() - t;
        }
        return lat;
    }

    static void worker(String[] a) throws Exception {
        String connect = a[0];
        String[] hp = a[1].split(":");
        mntrAddr = new InetSocketAddress(hp[0], Integer.parseInt(hp[1]));
        int n = Integer.parseInt(a[2]);
        int m = Integer.parseInt(a[3]);
        int k = Integer.parseInt(a[4]);

        CuratorFramework c = connect(connect);
        String base = "/bench/curator";
        ensure(c, "/bench", new byte[0]);
        ensure(c, base, new byte[0]);
        String data = base + "/data";
        byte[] payload = new byte[32];
        Arrays.fill(payload, (byte) 7);
        ensure(c, data, payload);
        String rt = base + "/rt";
        try {
            c.delete().forPath(rt);
        } catch (KeeperException.NoNodeException e) {
            // fine
        }
        String lockPath = base + "/lock";
        ensure(c, lockPath, new byte[0]);
        InterProcessMutex mutex = new InterProcessMutex(c, lockPath);

        // Warm-up pass (JIT): half of every measured loop, not measured.
        rtLoop(c, rt, n / 2);
        pipeLoop(c, data, m / 2);
        lockLoop(mutex, k / 2);

        Snap s = begin();
        long[] lat = rtLoop(c, rt, n);
        end("rt", n, s, lat);

        s = begin();
        pipeLoop(c, data, m);
        end("pipe", m, s, null);

        s = begin();
        lat = lockLoop(mutex, k);
        end("lock", k, s, lat);

        c.close();
        put("rss_hwm_kb", statusKb("VmHWM"));
        put("rss_end_kb", statusKb("VmRSS"));
        System.out.flush();
    }

    static long unixNs() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000_000L + now.getNano();
    }

    static void handoff(String[] a) throws Exception {
        String connect = a[0];
        String path = a[1];
        int h = Integer.parseInt(a[2]);
        int warm = Integer.parseInt(a[3]);
        long holdMs = Long.parseLong(a[4]);
        String id = a[5];
        CuratorFramework c = connect(connect);
        ensure(c, "/bench", new byte[0]);
        ensure(c, path, new byte[0]);
        String warmPath = path + "-warm-" + id;
        ensure(c, warmPath, new byte[0]);
        lockLoop(new InterProcessMutex(c, warmPath), warm);
        InterProcessMutex mutex = new InterProcessMutex(c, path);
        System.out.println("ready");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        in.readLine();
        long[] acquired = new long[h];
        long[] released = new long[h];
        for (int i = 0; i < h; i++) {
            mutex.acquire();
            acquired[i] = unixNs();
            // hold long enough for the other process to queue behind us
            Thread.sleep(holdMs);
            released[i] = unixNs();
            mutex.release();
        }
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < h; i++) {
            sb.append("H ").append(acquired[i]).append(' ').append(released[i]).append('\n');
        }
        System.out.print(sb);
        c.close();
        System.out.println("done");
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            System.out.println("error usage: CuratorBench worker|handoff ...");
            System.exit(2);
        }
        String[] rest = Arrays.copyOfRange(args, 1, args.length);
        try {
            if (args[0].equals("worker")) {
                worker(rest);
            } else if (args[0].equals("handoff")) {
                handoff(rest);
            } else {
                System.out.println("error unknown mode " + args[0]);
                System.exit(2);
            }
        } catch (Exception e) {
            System.out.println("error " + e);
            e.printStackTrace();
            System.exit(1);
        }
        System.exit(0);
    }
}
