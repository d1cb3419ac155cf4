//! A real MIT Kerberos KDC for the GSSAPI tests: Debian's `krb5kdc` (package
//! `krb5-kdc`) serving a realm made for the test with `kdb5_util` and
//! `kadmin.local` (package `krb5-admin-server`) in a fresh directory under
//! `std::env::temp_dir()`, on a free 127.0.0.1 port (TCP and UDP; the
//! `krb5.conf` written for clients asks for TCP). Principals get random keys
//! exported to keytabs; [`Kdc::kinit`] (package `krb5-user`) turns a keytab
//! into credentials in a cache collection.
//!
//! Like the ZooKeeper servers ([`crate::zk`]), the KDC dies with the test
//! process even when `Drop` never runs: it is started by a `bash` wrapper
//! whose stdin is a pipe only this process holds. Nothing here skips: a
//! missing program or a KDC that does not start panics and says why.
//!
//! Set `ZKLOCK_KEEP_ZK_DIRS=1` to keep the directory (configs, database,
//! keytabs, `kdc.log`) after `Drop`.

use std::fs;
use std::io::ErrorKind;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use crate::{free_ports, scratch_dir};
use zklock_test::watchdog::Watched;

/// How long the KDC may take to listen before the test fails.
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// How long one `kdb5_util`, `kadmin.local` or `kinit` may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// Attempts to start when a freshly picked port turned out to be taken.
const START_ATTEMPTS: usize = 3;
/// How long the stopped KDC may take to be reaped before we kill its wrapper.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// How to get the programs.
const INSTALL_HINT: &str =
    "install Debian's krb5-kdc, krb5-admin-server and krb5-user (scripts/setup.sh does)";

/// One MIT KDC serving one realm on 127.0.0.1. See the module docs.
pub struct Kdc {
    realm: String,
    dir: PathBuf,
    port: u16,
    process: Mutex<Option<Watched>>,
}

impl Kdc {
    /// Creates the realm `realm` (upper case by convention, e.g.
    /// `ZKLOCK.TEST`) and starts its KDC. Panics, saying why, if a program
    /// is missing or the KDC does not listen within 20 s.
    pub fn start(realm: &str) -> Kdc {
        let dir = scratch_dir("kdc");
        let mut kdc = Kdc {
            realm: realm.to_owned(),
            dir,
            port: 0,
            process: Mutex::new(None),
        };
        let mut attempt = 1;
        loop {
            kdc.port = free_ports(1)[0];
            kdc.write_configs();
            if attempt == 1 {
                let master = format!("master-{}", std::process::id());
                kdc.run(
                    "kdb5_util",
                    &["-r", realm, "-P", &master, "create", "-s"],
                    &[],
                );
            }
            kdc.spawn();
            match kdc.wait_listening() {
                Ok(()) => return kdc,
                Err(why) => {
                    kdc.stop();
                    let log = kdc.log_tail(40);
                    let in_use = log.contains("Address already in use");
                    if in_use && attempt < START_ATTEMPTS {
                        attempt += 1;
                        continue;
                    }
                    panic!(
                        "KDC for {realm} on 127.0.0.1:{}: {why}\n---- {} ----\n{log}\n---- end ----",
                        kdc.port,
                        kdc.dir.join("kdc.log").display()
                    );
                }
            }
        }
    }

    /// The realm.
    pub fn realm(&self) -> &str {
        &self.realm
    }

    /// The KDC's address (TCP and UDP).
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// The KDC's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The `krb5.conf` that points at this KDC (TCP only, no DNS), for
    /// clients (`KRB5_CONFIG`) and for Java (`-Djava.security.krb5.conf`).
    pub fn krb5_conf(&self) -> PathBuf {
        self.dir.join("krb5.conf")
    }

    /// `name@REALM`.
    pub fn principal(&self, name: &str) -> String {
        format!("{name}@{}", self.realm)
    }

    /// Creates the principal `name` (e.g. `alice` or
    /// `zookeeper/localhost`) with a random key and exports that key to a
    /// keytab of its own, whose path it returns. Panics if it cannot.
    pub fn add_principal(&self, name: &str) -> PathBuf {
        let keytab = self
            .dir
            .join(format!("{}.keytab", name.replace(['/', '@'], "_")));
        let added = self.kadmin(&format!("addprinc -randkey {name}"));
        assert!(
            added.contains("created"),
            "kadmin.local: addprinc {name}: {added}"
        );
        let exported = self.kadmin(&format!("ktadd -k {} {name}", keytab.display()));
        assert!(
            exported.contains("added to keytab") && keytab.is_file(),
            "kadmin.local: ktadd {name}: {exported}"
        );
        keytab
    }

    /// Gets `name`'s ticket-granting ticket with its keytab into this
    /// KDC's credential cache collection and returns the collection's name
    /// (`DIR:<dir>`, for `KRB5CCNAME`): each principal has a cache of its
    /// own there, the one that came last is the default. Panics if `kinit`
    /// fails.
    pub fn kinit(&self, name: &str, keytab: &Path) -> String {
        let collection = self.dir.join("ccaches");
        fs::create_dir_all(&collection)
            .unwrap_or_else(|e| panic!("creating {}: {e}", collection.display()));
        let cc = format!("DIR:{}", collection.display());
        let keytab = keytab.display().to_string();
        let principal = self.principal(name);
        self.run(
            "kinit",
            &["-k", "-t", &keytab, "-c", &cc, &principal],
            &[("KRB5CCNAME", &cc)],
        );
        cc
    }

    /// The last `lines` lines of the KDC's log.
    pub fn log_tail(&self, lines: usize) -> String {
        let mut text = String::new();
        for name in ["kdc.out", "kdc.log"] {
            if let Ok(bytes) = fs::read(self.dir.join(name)) {
                text.push_str(&String::from_utf8_lossy(&bytes));
            }
        }
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    fn write_configs(&self) {
        let (realm, dir, port) = (&self.realm, self.dir.display(), self.port);
        let krb5 = format!(
            "[libdefaults]\n\
             \x20default_realm = {realm}\n\
             \x20dns_lookup_realm = false\n\
             \x20dns_lookup_kdc = false\n\
             \x20dns_canonicalize_hostname = false\n\
             \x20rdns = false\n\
             \x20udp_preference_limit = 1\n\
             \x20ticket_lifetime = 1h\n\
             \x20forwardable = false\n\
             \x20default_ccache_name = FILE:{dir}/default.ccache\n\
             \x20default_client_keytab_name = FILE:{dir}/default-client.keytab\n\
             \x20default_keytab_name = FILE:{dir}/default.keytab\n\
             [realms]\n\
             \x20{realm} = {{\n\
             \x20 kdc = 127.0.0.1:{port}\n\
             \x20}}\n\
             [domain_realm]\n\
             \x20localhost = {realm}\n"
        );
        let kdc = format!(
            "[kdcdefaults]\n\
             \x20kdc_listen = 127.0.0.1:{port}\n\
             \x20kdc_tcp_listen = 127.0.0.1:{port}\n\
             [realms]\n\
             \x20{realm} = {{\n\
             \x20 database_name = {dir}/principal\n\
             \x20 key_stash_file = {dir}/stash\n\
             \x20 acl_file = {dir}/kadm5.acl\n\
             \x20 kdc_listen = 127.0.0.1:{port}\n\
             \x20 kdc_tcp_listen = 127.0.0.1:{port}\n\
             \x20 supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal\n\
             \x20}}\n\
             [logging]\n\
             \x20kdc = FILE:{dir}/kdc.log\n\
             \x20admin_server = FILE:{dir}/kadmin.log\n\
             \x20default = FILE:{dir}/krb5.log\n"
        );
        for (name, text) in [
            ("krb5.conf", krb5),
            ("kdc.conf", kdc),
            ("kadm5.acl", String::new()),
        ] {
            let path = self.dir.join(name);
            fs::write(&path, text).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        }
    }

    /// The environment every Kerberos program here runs with: this realm's
    /// configs, never the system's.
    fn env(&self) -> [(&'static str, PathBuf); 2] {
        [
            ("KRB5_CONFIG", self.krb5_conf()),
            ("KRB5_KDC_PROFILE", self.dir.join("kdc.conf")),
        ]
    }

    /// `kadmin.local -q query`; its output (it exits 0 even when the query
    /// failed: callers check the text).
    fn kadmin(&self, query: &str) -> String {
        let out = self.run("kadmin.local", &["-r", &self.realm, "-q", query], &[]);
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }

    /// Runs a Kerberos program to its end (at most 30 s); panics if it
    /// cannot be run, fails or hangs.
    fn run(&self, program: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut command = Command::new(resolve(program));
        command
            .args(args)
            .envs(self.env())
            .envs(env.iter().copied())
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().unwrap_or_else(|e| {
            if e.kind() == ErrorKind::NotFound {
                panic!("Kerberos: `{program}` not found: {INSTALL_HINT}");
            }
            panic!("Kerberos: cannot run `{program}`: {e}")
        });
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(10)),
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!(
                        "Kerberos: `{program} {}` did not finish in {COMMAND_TIMEOUT:?}",
                        args.join(" ")
                    );
                }
            }
        }
        let out = child
            .wait_with_output()
            .unwrap_or_else(|e| panic!("Kerberos: reading `{program}`'s output: {e}"));
        assert!(
            out.status.success(),
            "Kerberos: `{program} {}` failed ({}):\n{}{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    fn spawn(&self) {
        let out_path = self.dir.join("kdc.out");
        let out = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&out_path)
            .unwrap_or_else(|e| panic!("opening {}: {e}", out_path.display()));
        let err = out
            .try_clone()
            .unwrap_or_else(|e| panic!("cloning a log handle: {e}"));
        let mut command =
            Watched::command("zklock-kdc-wrapper", &self.dir, None, resolve("krb5kdc"));
        command
            .args(["-n", "-r", &self.realm, "-P"])
            .arg(self.dir.join("kdc.pid"))
            .envs(self.env())
            .current_dir(&self.dir)
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err));
        let watched = Watched::spawn(command)
            .unwrap_or_else(|e| panic!("KDC: cannot run bash to start krb5kdc: {e}"));
        *self.lock() = Some(watched);
    }

    /// Polls the TCP port until it accepts; fails early if the KDC exits.
    fn wait_listening(&self) -> Result<(), String> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(process) = self.lock().as_mut() {
                match process.try_wait() {
                    Ok(None) => {}
                    Ok(Some(status)) => {
                        let hint = if status.code() == Some(127) {
                            format!(" (krb5kdc not found? {INSTALL_HINT})")
                        } else {
                            String::new()
                        };
                        return Err(format!("krb5kdc exited with {status}{hint}"));
                    }
                    Err(e) => return Err(format!("cannot poll krb5kdc: {e}")),
                }
            }
            if TcpStream::connect_timeout(&self.addr(), Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!("not listening after {READY_TIMEOUT:?}"));
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Watched>> {
        self.process.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stops the KDC (the directory stays) and reaps it.
    fn stop(&self) {
        let Some(process) = self.lock().take() else {
            return;
        };
        process.stop(STOP_TIMEOUT);
    }
}

/// The KDC's programs are in `/usr/sbin`, which a user's `PATH` may lack.
fn resolve(program: &str) -> PathBuf {
    ["/usr/sbin", "/sbin", "/usr/bin"]
        .iter()
        .map(|dir| Path::new(dir).join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from(program))
}

impl Drop for Kdc {
    fn drop(&mut self) {
        self.stop();
        if std::env::var_os("ZKLOCK_KEEP_ZK_DIRS").is_some() {
            eprintln!("keeping KDC directory {}", self.dir.display());
        } else {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}
