//! The help texts: `zklock --help` and each subcommand's.

pub const MAIN_HELP: &str = "\
zklock: flock for a cluster. Distributed locks on Apache ZooKeeper.

Usage:
  zklock [GLOBAL OPTIONS] exec [-w SECS | -n] [-s] [-E CODE] [--data TEXT] [--max-hold SECS] [--revocable] LOCK_PATH -- CMD [ARGS...]
  zklock [GLOBAL OPTIONS] status [--json] LOCK_PATH
  zklock [GLOBAL OPTIONS] revoke LOCK_PATH
  zklock [GLOBAL OPTIONS] leader [-w SECS] --id TEXT ELECTION_PATH -- CMD [ARGS...]
  zklock help [exec|status|leader|revoke]

Global options (also accepted after the subcommand):
  -c, --connect HOSTS        host:port[,host:port...][/chroot]
                             (default: $ZKLOCK_CONNECT, else 127.0.0.1:2181)
      --session-timeout SECS ZooKeeper session timeout (default 10); also how
                             long to wait for a server at startup
  -v, --verbose              log to stderr (-vv, -vvv: more)
      --tls-ca FILE          use TLS; FILE is the PEM CA of the servers
      --tls-cert FILE, --tls-key FILE
                             PEM client certificate and key (mutual TLS)
      --tls-server-name NAME the name the servers' certificates carry
      --sasl-user USER       SASL DIGEST-MD5 login; the password comes from
                             --sasl-password-file FILE, else
                             $ZKLOCK_SASL_PASSWORD (never from the command line)
      --digest-file FILE     digest auth with the user:password in FILE
                             (else $ZKLOCK_DIGEST, when set)
  -h, --help                 this help; 'zklock SUBCOMMAND --help' for each
      --version              print the version

Exit codes:
  CMD's status         exec/leader: CMD ran; 128+N if CMD died of signal N
  0                    status: done; revoke: the holder was asked
  1 (or -E CODE)       the lock was not acquired within -w / at once with -n
  64                   bad arguments or a bad path
  66                   an input file (TLS, password, digest) is missing or unreadable
  69                   no ZooKeeper server reachable within the session timeout,
                       or its host name does not resolve
  70                   internal error
  75                   the lock was lost (session expired, node deleted,
                       --max-hold reached)
  77                   permission denied by the ZooKeeper ACL
  126, 127             CMD could not be run / was not found
  128+N                zklock was stopped by signal N before CMD started

Example:
  zklock -c zk1:2181,zk2:2181,zk3:2181 exec -w 60 /locks/nightly -- ./backup.sh
";

pub const EXEC_HELP: &str = "\
zklock exec: run a command while holding a lock.

Usage: zklock [GLOBAL OPTIONS] exec [OPTIONS] LOCK_PATH -- CMD [ARGS...]

Acquires the lock at LOCK_PATH (exclusive by default), runs CMD with the lock
held, releases it when CMD exits and exits with CMD's status. Waiters get the
lock in the order they asked for it.

Options:
  -w, --wait SECS              give up after SECS (fractions allowed)
  -n, --nonblock               give up at once if the lock is held
  -s, --shared                 take the read side of the read/write lock:
                               shared with other -s holders, exclusive otherwise
  -E, --conflict-exit-code N   exit code when giving up (default 1)
      --data TEXT              stored in the lock node, shown by 'zklock status'
                               (default hostname:pid)
  -k, --kill-after SECS        when the lock is lost, SIGKILL CMD this long
                               after SIGTERM (default 5)
      --max-hold SECS          hold the lock at most SECS after it is granted:
                               then the lock is let go (its node deleted),
                               whatever CMD does, and CMD is stopped as on any
                               loss (exit 75); the next holder may start while
                               CMD is still stopping (up to --kill-after)
      --revocable              let 'zklock revoke' (or Curator's Revoker) ask
                               for the lock: CMD then gets SIGTERM, and the
                               lock is released when it exits
      --acl ACL                of the lock node and of the lock path, when
                               zklock creates it: creator (only this login),
                               open, or scheme:id:perms[,...] with perms from
                               cdrwa (world:r is world:anyone:r). Default:
                               creator when --sasl-user or digest auth is
                               used, else open. ZooKeeper checks delete on the
                               parent, so only a lock path that denies others
                               DELETE keeps them from deleting the node.
                               Folders above the lock path that zklock creates
                               are shared by every lock in them: with a login
                               anyone may create locks in them and only their
                               creator change or delete them (world:rc and
                               the creator's cdrwa), else they are open

CMD's environment gets ZKLOCK_FENCING_TOKEN (a number that rises with every
new holder of any lock in the ensemble: pass it to what you protect and let
it refuse older tokens) and ZKLOCK_NODE (the path of our lock node), and
not zklock's own secrets: ZKLOCK_SASL_PASSWORD and ZKLOCK_DIGEST are removed.

If the lock is lost while CMD runs (session expired, node deleted, --max-hold
reached), zklock says so on stderr, sends CMD SIGTERM (SIGKILL after --kill-after) and exits
75. SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to zklock are
passed on to CMD (a terminal's Ctrl-C reaches CMD directly, and only once),
and the lock is released when CMD ends. A signal while waiting gives up the
place in the queue (exit 128+N). zklock is one process, CMD its child: stop
zklock (SIGSTOP) past the session timeout and it stops CMD and exits 75 when
resumed. If zklock is killed with SIGKILL, the kernel sends CMD SIGTERM and
zklock's release helper (a copy of zklock in a process group of its own,
'zklock --release-helper' in ps) waits for CMD to end (SIGKILL after
--kill-after or a third of the session timeout, whichever is shorter, so
that CMD has ended before the server can expire zklock's session), then
deletes the lock node (connecting with zklock's TLS files and credentials,
handed over a pipe), which frees the lock at once; if the whole machine
dies, the server frees it when the session times out.

Nodes are named like Apache Curator's (_c_<uuid>-lock-<seq>, and
_c_<uuid>-__READ__<seq> with -s), so Curator's InterProcessMutex and kazoo
locks (with extra_lock_patterns) on the same path queue with zklock.

Examples:
  zklock exec /locks/deploy -- ./deploy.sh --prod
  zklock exec -n -E 0 /locks/cron/cleanup -- ./cleanup.sh   # skip if running
  zklock exec -w 30 -s /locks/schema -- ./read-report.sh
";

pub const LEADER_HELP: &str = "\
zklock leader: run a command while this process is the elected leader.

Usage: zklock [GLOBAL OPTIONS] leader [OPTIONS] --id TEXT ELECTION_PATH -- CMD [ARGS...]

Campaigns at ELECTION_PATH under the name --id, runs CMD once elected and
steps down when CMD exits, exiting with CMD's status. Loss of leadership is
handled like a lost lock in 'zklock exec': CMD gets SIGTERM (SIGKILL after
--kill-after) and zklock exits 75.

Options:
      --id TEXT                this candidate's name (required), stored in
                               its node and shown by 'zklock status'
  -w, --wait SECS              give up campaigning after SECS
  -n, --nonblock               give up at once unless elected immediately
  -E, --conflict-exit-code N   exit code when giving up (default 1)
  -k, --kill-after SECS        SIGKILL delay after SIGTERM on loss (default 5)
      --max-hold SECS          lead at most SECS after being elected, as
                               'zklock exec --max-hold' holds a lock
      --acl ACL                as for 'zklock exec'

CMD gets ZKLOCK_FENCING_TOKEN and ZKLOCK_NODE as with 'zklock exec'.

Example:
  zklock leader --id \"$(hostname)\" /election/scheduler -- ./scheduler --serve
";

pub const STATUS_HELP: &str = "\
zklock status: show who holds a lock and who waits for it.

Usage: zklock [GLOBAL OPTIONS] status [--json] LOCK_PATH

Lists the contenders at LOCK_PATH in queue order: holder(s) first, then
waiters. For each: role, node name, sequence, kind (exclusive, read, write,
lease), origin, owner session, czxid (the holder's fencing token) and data.

Origin is judged from the node name: 'protected' for the _c_<uuid>- naming
that zklock and Apache Curator share (they cannot be told apart by name),
'kazoo' for kazoo's <uuid>__lock__ naming, 'other' for anything else.

Options:
      --json    one JSON object: {\"path\", \"holders\", \"waiting\", \"queue\": [...]}

Examples:
  zklock status /locks/deploy
  zklock -c zk1:2181 status --json /locks/deploy | jq '.queue[0].data'
";

pub const REVOKE_HELP: &str = "\
zklock revoke: ask whoever holds a lock to let go.

Usage: zklock [GLOBAL OPTIONS] revoke LOCK_PATH

Writes Apache Curator's revocation message into the node of the lock's
holder (the first in its queue). A holder that opted in lets go: 'zklock
exec --revocable' sends its CMD SIGTERM and releases when CMD exits; a
Curator InterProcessMutex made revocable calls its listener. Other holders
ignore it, and nothing in the node tells them apart: exit 0 means the
holder was asked, not that it lets go. Prints the holder's node, or says
that nobody holds the lock (exit 1).

Examples:
  zklock revoke /locks/deploy
  zklock -c zk1:2181 revoke /locks/nightly-report
";
