//! What a test may change about its servers: which ZooKeeper, the client
//! port, tick, extra `zoo.cfg` lines, a TLS port, SASL users or a Kerberos
//! principal.

use std::path::{Path, PathBuf};

/// Settings shared by standalone servers and ensembles.
#[derive(Clone, Debug)]
pub struct ZkOptions {
    tick_ms: u64,
    extra: Vec<(String, String)>,
    /// A TLS client port besides the plaintext one.
    pub(super) secure: bool,
    /// Extra JVM flags (`-D...`).
    pub(super) jvm: Vec<String>,
    /// A JAAS configuration, written into each server's directory.
    pub(super) jaas: Option<String>,
    /// The JVM's classpath, when the caller chose the ZooKeeper.
    classpath: Option<String>,
    /// A fixed client port (member `i` of an ensemble: this plus `i`).
    pub(super) client_port: Option<u16>,
}

impl Default for ZkOptions {
    fn default() -> Self {
        ZkOptions {
            tick_ms: 2000,
            extra: Vec::new(),
            secure: false,
            jvm: Vec::new(),
            jaas: None,
            classpath: None,
            client_port: None,
        }
    }
}

impl ZkOptions {
    /// Defaults: `tickTime=2000`, nothing extra.
    pub fn new() -> Self {
        Self::default()
    }

    /// `tickTime` in milliseconds. Session timeouts are clamped by the server to
    /// `[2 * tick, 20 * tick]` unless `minSessionTimeout`/`maxSessionTimeout` are set.
    pub fn tick_ms(mut self, tick_ms: u64) -> Self {
        self.tick_ms = tick_ms;
        self
    }

    /// Runs the ZooKeeper of an unpacked Apache release (the directory
    /// holding `lib/`), e.g. `apache-zookeeper-3.8.4-bin`. Overrides the
    /// environment (`ZOOKEEPER_CLASSPATH`, `ZOOKEEPER_HOME`).
    pub fn zookeeper_home(mut self, home: impl AsRef<Path>) -> Self {
        self.classpath = Some(home_classpath(home.as_ref()));
        self
    }

    /// Runs the JVM with exactly this classpath (`:`-separated jars or
    /// `dir/*`), which must hold ZooKeeper's server and its dependencies.
    /// Overrides [`ZkOptions::zookeeper_home`] and the environment.
    pub fn classpath(mut self, classpath: &str) -> Self {
        self.classpath = Some(classpath.to_owned());
        self
    }

    /// Listens for clients on `127.0.0.1:port` instead of a free port
    /// (member `i` of an ensemble on `port + i`). Starting panics, before
    /// any server is started, if such a port is taken (another server there
    /// would answer for it); 0 means a free port.
    pub fn client_port(mut self, port: u16) -> Self {
        self.client_port = (port != 0).then_some(port);
        self
    }

    /// An extra flag for the server's JVM; it comes after the defaults, so
    /// that e.g. `-Xmx1g` overrides their 256 MB heap.
    pub fn jvm_flag(mut self, flag: &str) -> Self {
        self.jvm.push(flag.to_owned());
        self
    }

    /// An extra `key=value` line for `zoo.cfg` (e.g. `minSessionTimeout`); it
    /// comes after the defaults, so it overrides them.
    pub fn config(mut self, key: &str, value: &str) -> Self {
        self.extra.push((key.to_string(), value.to_string()));
        self
    }

    /// Adds a TLS client port (Netty connection factory) with these PKCS12
    /// stores; `need_client_cert`:
    /// `ssl.clientAuth=need`, else `none`.
    pub fn tls(
        mut self,
        keystore: &Path,
        truststore: &Path,
        password: &str,
        need_client_cert: bool,
    ) -> Self {
        self.secure = true;
        let auth = if need_client_cert { "need" } else { "none" };
        for (key, value) in [
            (
                "serverCnxnFactory",
                "org.apache.zookeeper.server.NettyServerCnxnFactory",
            ),
            ("ssl.keyStore.location", &keystore.display().to_string()),
            ("ssl.keyStore.password", password),
            ("ssl.keyStore.type", "PKCS12"),
            ("ssl.trustStore.location", &truststore.display().to_string()),
            ("ssl.trustStore.password", password),
            ("ssl.trustStore.type", "PKCS12"),
            ("ssl.clientAuth", auth),
            // The server would check our client certificate against the
            // reverse DNS of 127.0.0.1; the rustls side is what is tested.
            ("ssl.hostnameVerification", "false"),
        ] {
            self.extra.push((key.to_owned(), value.to_owned()));
        }
        self
    }

    /// SASL with a JAAS `DigestLoginModule` serving `users` (name, password).
    pub fn sasl_digest(mut self, users: &[(&str, &str)]) -> Self {
        let mut jaas =
            String::from("Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required");
        for (user, password) in users {
            jaas.push_str(&format!("\n  user_{user}=\"{password}\""));
        }
        jaas.push_str(";\n};\n");
        self.jaas = Some(jaas);
        self.extra.push((
            "authProvider.1".to_owned(),
            "org.apache.zookeeper.server.auth.SASLAuthenticationProvider".to_owned(),
        ));
        self
    }

    /// SASL with a JAAS `Krb5LoginModule`: the server is `principal`
    /// (`zookeeper/localhost@REALM`), its key in `keytab`, its KDC the one
    /// `krb5_conf` names.
    pub fn sasl_kerberos(mut self, principal: &str, keytab: &Path, krb5_conf: &Path) -> Self {
        self.jaas = Some(format!(
            "Server {{\n  com.sun.security.auth.module.Krb5LoginModule required\n  \
             useKeyTab=true\n  keyTab=\"{}\"\n  storeKey=true\n  useTicketCache=false\n  \
             principal=\"{principal}\";\n}};\n",
            keytab.display()
        ));
        self.jvm
            .push(format!("-Djava.security.krb5.conf={}", krb5_conf.display()));
        self.extra.push((
            "authProvider.1".to_owned(),
            "org.apache.zookeeper.server.auth.SASLAuthenticationProvider".to_owned(),
        ));
        self
    }

    /// The JVM's classpath: the one chosen here, else `ZOOKEEPER_CLASSPATH`,
    /// else `ZOOKEEPER_HOME`'s jars, else Debian's package. Panics, saying
    /// what to install, when none of them holds ZooKeeper.
    pub(super) fn resolved_classpath(&self) -> String {
        let debian = Path::new(DEBIAN_JAR).is_file();
        let slf4j = Path::new(DEBIAN_SLF4J_SIMPLE).is_file();
        classpath_of(self.classpath.as_deref(), env_value, debian, slf4j).unwrap_or_else(|| {
            panic!(
                "no ZooKeeper found: {DEBIAN_JAR} is missing. Install it (Debian/Ubuntu: \
                 `apt-get install zookeeper`; zklock's repository: ./scripts/setup.sh), or set \
                 ZOOKEEPER_HOME to an unpacked Apache ZooKeeper release (or ZOOKEEPER_CLASSPATH, \
                 or ZkOptions::zookeeper_home)"
            )
        })
    }

    pub(super) fn secure_config(&self, secure_port: Option<u16>) -> String {
        match secure_port {
            Some(port) => format!("secureClientPort={port}\nsecureClientPortAddress=127.0.0.1\n"),
            None => String::new(),
        }
    }

    pub(super) fn common_config(&self, data_dir: &Path, client_port: u16) -> String {
        let mut cfg = format!(
            "tickTime={tick}\n\
             dataDir={data}\n\
             clientPort={client_port}\n\
             clientPortAddress=127.0.0.1\n\
             maxClientCnxns=0\n\
             4lw.commands.whitelist=*\n\
             admin.enableServer=false\n\
             # Tests kill JVMs, not machines: the page cache survives, so skipping\n\
             # fsync loses nothing and makes every write much cheaper.\n\
             forceSync=no\n\
             preAllocSize=1024\n",
            tick = self.tick_ms,
            data = data_dir.display(),
        );
        for (key, value) in &self.extra {
            cfg.push_str(&format!("{key}={value}\n"));
        }
        cfg
    }
}

/// Debian's server jar; its manifest names jute, netty and slf4j-api.
const DEBIAN_JAR: &str = "/usr/share/java/zookeeper.jar";
/// A logging binding Debian packages beside it.
const DEBIAN_SLF4J_SIMPLE: &str = "/usr/share/java/slf4j-simple.jar";

/// An Apache release's jars: `lib/*` (3.5 and later), and the top-level
/// jar older releases keep beside it.
fn home_classpath(home: &Path) -> String {
    let lib: PathBuf = home.join("lib").join("*");
    let top: PathBuf = home.join("*");
    format!("{}:{}", lib.display(), top.display())
}

/// The first of the four places that names a ZooKeeper: `chosen` (the
/// options'), the variables `env` reads, Debian's jar if `debian` (with its
/// slf4j binding if `slf4j`: without one the server's log says nothing).
fn classpath_of(
    chosen: Option<&str>,
    env: impl Fn(&str) -> Option<String>,
    debian: bool,
    slf4j: bool,
) -> Option<String> {
    if let Some(classpath) = chosen {
        return Some(classpath.to_owned());
    }
    if let Some(classpath) = env("ZOOKEEPER_CLASSPATH") {
        return Some(classpath);
    }
    if let Some(home) = env("ZOOKEEPER_HOME") {
        return Some(home_classpath(Path::new(&home)));
    }
    match (debian, slf4j) {
        (false, _) => None,
        (true, false) => Some(DEBIAN_JAR.to_owned()),
        (true, true) => Some(format!("{DEBIAN_JAR}:{DEBIAN_SLF4J_SIMPLE}")),
    }
}

/// A variable's value, if set and not empty.
fn env_value(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An environment with only `vars` set.
    fn env_of(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn the_first_of_the_four_places_that_names_a_zookeeper_wins() {
        let all = env_of(&[
            ("ZOOKEEPER_CLASSPATH", "/cp/*"),
            ("ZOOKEEPER_HOME", "/home"),
        ]);
        let home_only = env_of(&[("ZOOKEEPER_HOME", "/home")]);
        let none = env_of(&[]);
        // 1. The options' choice, over everything else.
        assert_eq!(
            classpath_of(Some("/chosen.jar"), &all, true, true).as_deref(),
            Some("/chosen.jar")
        );
        // 2. ZOOKEEPER_CLASSPATH, over ZOOKEEPER_HOME and Debian's.
        assert_eq!(
            classpath_of(None, &all, true, true).as_deref(),
            Some("/cp/*")
        );
        // 3. ZOOKEEPER_HOME's jars, over Debian's.
        assert_eq!(
            classpath_of(None, &home_only, true, true).as_deref(),
            Some("/home/lib/*:/home/*")
        );
        // 4. Debian's package, with its logging binding where there is one.
        assert_eq!(
            classpath_of(None, &none, true, true),
            Some(format!("{DEBIAN_JAR}:{DEBIAN_SLF4J_SIMPLE}"))
        );
        assert_eq!(
            classpath_of(None, &none, true, false).as_deref(),
            Some(DEBIAN_JAR)
        );
        // None of them: nothing (the caller panics, saying what to install).
        assert_eq!(classpath_of(None, &none, false, true), None);
    }
}
