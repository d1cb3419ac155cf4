// Interoperability peer: drives real Apache Curator lock recipes over a
// line protocol so zklock's integration tests can make Curator contend
// with our library (and with kazoo) for the same locks.
//
// Usage: java CuratorPeer <connect_string> <lock_path> <kind> <id>
//   kind: mutex | revocable-mutex | read | write | semaphore:<n> | leader
//
// stdout (one line each, flushed):
//   ready                               connected, commands accepted
//   acquired <node-name> <unix_millis>  lock held (millis taken right after acquisition)
//   timeout                             "acquire <ms>" gave up, nothing held or queued
//   released <unix_millis>              lock released (millis taken right BEFORE releasing)
//   children <a,b,c>                    sorted child names of lock_path (empty if none)
//   participants <a,b,c>                the recipe's own participant listing, sorted: node
//                                       names (mutex, read, write: getParticipantNodes;
//                                       semaphore: its lease nodes), participant ids (leader)
//   error <message>                     command failed; the peer keeps going
//   revocation-requested                (revocable-mutex) someone asked the holder to let go
//   revoked <path>                      "revoke <path>" wrote Curator's revocation message
// stdin commands: acquire | acquire <timeout_ms> | release | children | participants
//                 | revoke <path> | quit
// quit or EOF on stdin: release whatever is held, close the client, exit 0.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.locks.Revoker;
import org.apache.curator.retry.RetryNTimes;
import org.apache.zookeeper.KeeperException;

public final class CuratorPeer {
    private static final String QUIT = "\u0000quit";
    private static final Object OUT = new Object();

    private CuratorPeer() {}

    static void emit(String line) {
        synchronized (OUT) {
            System.out.print(line.replace('\n', ' ').replace('\r', ' ') + "\n");
            System.out.flush();
        }
    }

    static String describe(Throwable t) {
        String msg = t.getMessage();
        return t.getClass().getSimpleName() + (msg == null ? "" : ": " + msg);
    }

    static String lastSegment(String path) {
        if (path == null) {
            return "";
        }
        int slash = path.lastIndexOf('/');
        return slash >= 0 ? path.substring(slash + 1) : path;
    }

    /** One lock recipe. All calls happen on the single worker thread. */
    interface Holder {
        /** Returns the held node name ("" if unknown), or null on timeout. timeoutMs < 0 waits forever. */
        String acquire(long timeoutMs) throws Exception;

        void release() throws Exception;

        boolean held();

        /** What the recipe itself lists as its participants. */
        List<String> participants() throws Exception;
    }

    /** InterProcessMutex and the read/write sides of InterProcessReadWriteLock. */
    static final class MutexHolder implements Holder {
        private static final Method LOCK_PATH;

        static {
            Method m = null;
            try {
                m = InterProcessMutex.class.getDeclaredMethod("getLockPath");
                m.setAccessible(true);
            } catch (ReflectiveOperationException | RuntimeException e) {
                m = null;
            }
            LOCK_PATH = m;
        }

        private final InterProcessMutex mutex;
        private boolean held;

        MutexHolder(InterProcessMutex mutex) {
            this.mutex = mutex;
        }

        @Override
        public String acquire(long timeoutMs) throws Exception {
            if (timeoutMs < 0) {
                mutex.acquire();
            } else if (!mutex.acquire(timeoutMs, TimeUnit.MILLISECONDS)) {
                return null;
            }
            held = true;
            return nodeName();
        }

        private String nodeName() {
            if (LOCK_PATH == null) {
                return "";
            }
            try {
                return lastSegment((String) LOCK_PATH.invoke(mutex));
            } catch (ReflectiveOperationException | RuntimeException e) {
                return "";
            }
        }

        @Override
        public void release() throws Exception {
            held = false;
            mutex.release();
        }

        @Override
        public List<String> participants() throws Exception {
            List<String> names = new ArrayList<>();
            for (String node : mutex.getParticipantNodes()) {
                names.add(lastSegment(node));
            }
            return names;
        }

        @Override
        public boolean held() {
            return held;
        }
    }

    static final class SemaphoreHolder implements Holder {
        private final InterProcessSemaphoreV2 semaphore;
        private Lease lease;

        SemaphoreHolder(InterProcessSemaphoreV2 semaphore) {
            this.semaphore = semaphore;
        }

        @Override
        public String acquire(long timeoutMs) throws Exception {
            Lease l = timeoutMs < 0 ? semaphore.acquire() : semaphore.acquire(timeoutMs, TimeUnit.MILLISECONDS);
            if (l == null) {
                return null;
            }
            lease = l;
            return lastSegment(l.getNodeName());
        }

        @Override
        public void release() throws Exception {
            Lease l = lease;
            lease = null;
            l.close();
        }

        @Override
        public List<String> participants() throws Exception {
            List<String> names = new ArrayList<>();
            for (String node : semaphore.getParticipantNodes()) {
                names.add(lastSegment(node));
            }
            return names;
        }

        @Override
        public boolean held() {
            return lease != null;
        }
    }

    static final class LeaderHolder implements Holder {
        private final CuratorFramework client;
        private final String path;
        private final String id;
        private LeaderLatch latch;

        LeaderHolder(CuratorFramework client, String path, String id) {
            this.client = client;
            this.path = path;
            this.id = id;
        }

        @Override
        public String acquire(long timeoutMs) throws Exception {
            LeaderLatch l = new LeaderLatch(client, path, id);
            l.start();
            boolean ok = false;
            try {
                if (timeoutMs < 0) {
                    l.await();
                    ok = true;
                } else {
                    ok = l.await(timeoutMs, TimeUnit.MILLISECONDS);
                }
            } finally {
                if (!ok) {
                    l.close();
                }
            }
            if (!ok) {
                return null;
            }
            latch = l;
            return lastSegment(l.getOurPath());
        }

        @Override
        public void release() throws Exception {
            LeaderLatch l = latch;
            latch = null;
            l.close();
        }

        @Override
        public List<String> participants() throws Exception {
            // LeaderLatch.getParticipants reads each child's data as the
            // participant's id; a latch need not be started to list.
            LeaderLatch l = latch != null ? latch : new LeaderLatch(client, path, id);
            List<String> ids = new ArrayList<>();
            for (Participant p : l.getParticipants()) {
                ids.add(p.getId());
            }
            return ids;
        }

        @Override
        public boolean held() {
            return latch != null;
        }
    }

    static Holder makeHolder(CuratorFramework client, String path, String kind, String id) {
        if (kind.equals("mutex")) {
            return new MutexHolder(new InterProcessMutex(client, path));
        }
        if (kind.equals("revocable-mutex")) {
            InterProcessMutex mutex = new InterProcessMutex(client, path);
            mutex.makeRevocable(m -> emit("revocation-requested"));
            return new MutexHolder(mutex);
        }
        if (kind.equals("read")) {
            return new MutexHolder(new InterProcessReadWriteLock(client, path).readLock());
        }
        if (kind.equals("write")) {
            return new MutexHolder(new InterProcessReadWriteLock(client, path).writeLock());
        }
        if (kind.equals("leader")) {
            return new LeaderHolder(client, path, id);
        }
        if (kind.startsWith("semaphore:")) {
            int leases = Integer.parseInt(kind.substring("semaphore:".length()));
            if (leases < 1) {
                throw new IllegalArgumentException("semaphore needs at least 1 lease");
            }
            return new SemaphoreHolder(new InterProcessSemaphoreV2(client, path, leases));
        }
        throw new IllegalArgumentException("unknown lock kind '" + kind + "'");
    }

    static String children(CuratorFramework client, String path) {
        try {
            List<String> names = new ArrayList<>(client.getChildren().forPath(path));
            Collections.sort(names);
            return "children " + String.join(",", names);
        } catch (KeeperException.NoNodeException e) {
            return "children ";
        } catch (Exception e) {
            return "error children: " + describe(e);
        }
    }

    /** Runs every acquire/release on one thread (Curator mutexes are thread-owned). */
    static final class Worker extends Thread {
        private final Holder holder;
        private final BlockingQueue<String> queue = new LinkedBlockingQueue<>();
        private volatile boolean acquiring;

        Worker(Holder holder) {
            super("curator-peer-worker");
            this.holder = holder;
            setDaemon(true);
        }

        void submit(String command) {
            queue.add(command);
        }

        /** Asks the worker to release and stop; interrupts a pending acquire. */
        void shutdown() {
            queue.add(QUIT);
            if (acquiring) {
                interrupt();
            }
        }

        @Override
        public void run() {
            while (true) {
                String command;
                try {
                    command = queue.take();
                } catch (InterruptedException e) {
                    continue;
                }
                if (command.equals(QUIT)) {
                    Thread.interrupted();
                    if (holder.held()) {
                        try {
                            holder.release();
                        } catch (Exception e) {
                            // The client is closed next, which drops our ephemeral nodes anyway.
                        }
                    }
                    return;
                }
                handle(command);
            }
        }

        private void handle(String command) {
            String[] parts = command.trim().split("\\s+");
            try {
                switch (parts[0]) {
                    case "acquire": {
                        if (parts.length > 2) {
                            emit("error usage: acquire [timeout_ms]");
                            return;
                        }
                        long timeout = parts.length == 2 ? Long.parseLong(parts[1]) : -1;
                        if (holder.held()) {
                            emit("error already held");
                            return;
                        }
                        String node;
                        acquiring = true;
                        try {
                            node = holder.acquire(timeout);
                        } finally {
                            acquiring = false;
                        }
                        long now = System.currentTimeMillis();
                        emit(node == null ? "timeout" : "acquired " + node + " " + now);
                        return;
                    }
                    case "release": {
                        if (!holder.held()) {
                            emit("error not held");
                            return;
                        }
                        long now = System.currentTimeMillis();
                        holder.release();
                        emit("released " + now);
                        return;
                    }
                    default:
                        emit("error unknown command '" + command.trim() + "'");
                }
            } catch (Exception e) {
                emit("error " + parts[0] + ": " + describe(e));
            }
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 4) {
            emit("error usage: CuratorPeer <connect_string> <lock_path> <kind> <id>");
            System.exit(2);
        }
        String connect = args[0];
        String path = args[1];
        String kind = args[2];
        String id = args[3];

        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(connect)
                .sessionTimeoutMs(10_000)
                .connectionTimeoutMs(10_000)
                .retryPolicy(new RetryNTimes(30, 200))
                .defaultData(id.getBytes(StandardCharsets.UTF_8))
                .build();
        Holder holder;
        try {
            holder = makeHolder(client, path, kind, id);
        } catch (RuntimeException e) {
            emit("error " + describe(e));
            System.exit(2);
            return;
        }
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            emit("error could not connect to " + connect);
            client.close();
            System.exit(1);
        }

        Worker worker = new Worker(holder);
        worker.start();
        emit("ready");

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String command = line.trim();
            if (command.isEmpty()) {
                continue;
            }
            if (command.equals("quit")) {
                break;
            }
            if (command.equals("children")) {
                emit(children(client, path));
                continue;
            }
            if (command.equals("participants")) {
                try {
                    List<String> names = new ArrayList<>(holder.participants());
                    Collections.sort(names);
                    emit("participants " + String.join(",", names));
                } catch (Exception e) {
                    emit("error participants: " + describe(e));
                }
                continue;
            }
            if (command.startsWith("revoke ")) {
                String target = command.substring("revoke ".length()).trim();
                try {
                    Revoker.attemptRevoke(client, target);
                    emit("revoked " + target);
                } catch (Exception e) {
                    emit("error revoke: " + describe(e));
                }
                continue;
            }
            worker.submit(command);
        }

        worker.shutdown();
        worker.join(5_000);
        client.close();
        System.out.flush();
        System.exit(0);
    }
}
