// A standalone ZooKeeper 3.8 server embedded in this JVM, so a test can reach
// into its in-memory tree (ZKDatabase / DataTree) and put a parent's sequence
// counter near its end, which no client request can do.
//
// Usage: java ZkHarness <dir> <tickTimeMs>
// Binds 127.0.0.1 on a free port, then prints `zkh ready <port>` on stdout.
// Commands on stdin, one per line; every answer is one line starting `zkh `:
//   cversion <path> <int>  set the node's stored cversion   -> zkh ok | zkh err <why>
//   stored <path>          its stored cversion, pzxid, numChildren
//                                                           -> zkh ok <cv> <pzxid> <n>
//   stop                   shut down, keep <dir>            -> zkh ok, then exit 0
// EOF on stdin (the test process died): shut down, delete <dir>, exit 0.
// Everything else the JVM prints goes to stderr.

import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import org.apache.zookeeper.server.DataNode;
import org.apache.zookeeper.server.ServerCnxnFactory;
import org.apache.zookeeper.server.ZooKeeperServer;

public class ZkHarness {
    private static PrintStream out;

    public static void main(String[] args) throws Exception {
        // Keep stdout for our answers only; anything else logs to stderr.
        out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, "UTF-8");
        System.setOut(System.err);
        File dir = new File(args[0]);
        int tick = Integer.parseInt(args[1]);
        ZooKeeperServer zks = new ZooKeeperServer(new File(dir, "snap"), new File(dir, "log"), tick);
        ServerCnxnFactory factory =
            ServerCnxnFactory.createFactory(new InetSocketAddress("127.0.0.1", 0), 100);
        factory.startup(zks);
        out.println("zkh ready " + factory.getLocalPort());

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split(" ");
            try {
                switch (w[0]) {
                    case "cversion": {
                        DataNode n = zks.getZKDatabase().getNode(w[1]);
                        if (n == null) {
                            out.println("zkh err NoNode " + w[1]);
                            break;
                        }
                        int v = Integer.parseInt(w[2]);
                        // DataTree changes a parent's stat under its monitor.
                        synchronized (n) {
                            n.stat.setCversion(v);
                        }
                        out.println("zkh ok");
                        break;
                    }
                    case "stored": {
                        DataNode n = zks.getZKDatabase().getNode(w[1]);
                        if (n == null) {
                            out.println("zkh err NoNode " + w[1]);
                            break;
                        }
                        synchronized (n) {
                            out.println("zkh ok " + n.stat.getCversion() + " " + n.stat.getPzxid() + " "
                                + n.getChildren().size());
                        }
                        break;
                    }
                    case "stop":
                        factory.shutdown();
                        zks.shutdown();
                        out.println("zkh ok");
                        System.exit(0);
                        break;
                    default:
                        out.println("zkh err unknown command: " + line);
                }
            } catch (RuntimeException e) {
                out.println("zkh err " + e);
            }
        }
        // Our test process is gone: leave nothing behind.
        factory.shutdown();
        zks.shutdown();
        deleteTree(dir);
        System.exit(0);
    }

    private static void deleteTree(File f) {
        File[] kids = f.listFiles();
        if (kids != null) {
            for (File k : kids) {
                deleteTree(k);
            }
        }
        f.delete();
    }
}
