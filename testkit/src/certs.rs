//! Certificates for TLS tests, made at test time with `openssl` (PEM, for
//! rustls) and the JDK's `keytool` (PKCS12 stores, for ZooKeeper): a CA, a
//! server certificate for `DNS:localhost` and `IP:127.0.0.1`, a client
//! certificate, and a second CA that signed nothing the server has.
//! Generated once per test binary into a fresh temp directory.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::scratch::{subsec_nanos, target_dir};
use crate::zk::{ZkOptions, ZkServer};

/// Password of both PKCS12 stores.
pub const STORE_PASSWORD: &str = "zklock-test";

/// Paths of the generated files.
#[derive(Debug)]
pub struct Certs {
    pub dir: PathBuf,
    /// The CA that signed the server and client certificates (PEM).
    pub ca_pem: PathBuf,
    /// A CA that signed nothing we use (PEM): trusting it alone must fail.
    pub other_ca_pem: PathBuf,
    /// The client certificate and its PKCS#8 key (PEM).
    pub client_pem: PathBuf,
    pub client_key: PathBuf,
    /// The server's key store (key + chain) and trust store (the CA), PKCS12.
    pub server_keystore: PathBuf,
    /// The client certificate and key as a PKCS12 store, for Java clients.
    pub client_keystore: PathBuf,
    pub truststore: PathBuf,
}

impl Certs {
    /// Server options with a TLS port using these stores.
    pub fn server_options(&self, need_client_cert: bool) -> ZkOptions {
        ZkOptions::new().tls(
            &self.server_keystore,
            &self.truststore,
            STORE_PASSWORD,
            need_client_cert,
        )
    }
}

impl Certs {
    /// JVM flags that make ZooKeeper's Java client (and so Curator) use TLS
    /// with the client certificate.
    pub fn java_client_flags(&self) -> Vec<String> {
        let mut netty = vec![
            "-Dzookeeper.client.secure=true".to_owned(),
            "-Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty".to_owned(),
        ];
        for (key, value) in [
            (
                "keyStore.location",
                self.client_keystore.display().to_string(),
            ),
            ("keyStore.password", STORE_PASSWORD.to_owned()),
            ("keyStore.type", "PKCS12".to_owned()),
            ("trustStore.location", self.truststore.display().to_string()),
            ("trustStore.password", STORE_PASSWORD.to_owned()),
            ("trustStore.type", "PKCS12".to_owned()),
        ] {
            netty.push(format!("-Dzookeeper.ssl.{key}={value}"));
        }
        netty
    }
}

/// Netty jars ZooKeeper's Java client needs for TLS (Debian's names).
pub const JAVA_CLIENT_NETTY_JARS: &[&str] = &[
    "/usr/share/java/netty-handler.jar",
    "/usr/share/java/netty-transport.jar",
    "/usr/share/java/netty-buffer.jar",
    "/usr/share/java/netty-common.jar",
    "/usr/share/java/netty-codec.jar",
    "/usr/share/java/netty-resolver.jar",
    "/usr/share/java/netty-transport-native-unix-common.jar",
    "/usr/share/java/netty-transport-native-epoll.jar",
];

/// The binary's certificates, generated on first use. Panics saying which
/// tool failed: tests never skip quietly.
pub fn shared() -> &'static Certs {
    static CERTS: OnceLock<Certs> = OnceLock::new();
    CERTS.get_or_init(generate)
}

/// The binary's TLS server (client certificates required), started by the
/// first test that asks: one JVM for every TLS test of a binary.
pub fn tls_server() -> &'static ZkServer {
    static SERVER: OnceLock<ZkServer> = OnceLock::new();
    SERVER.get_or_init(|| ZkServer::start_with_options(&shared().server_options(true)))
}

/// `host` with [`tls_server`]'s secure port.
pub fn secure(host: &str) -> String {
    format!("{host}:{}", tls_server().secure_addr().port())
}

fn run(dir: &Path, program: &str, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program} (scripts/setup.sh installs it): {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A self-signed CA: `name.key`, `name.pem`.
#[rustfmt::skip]
fn make_ca(dir: &Path, name: &str) {
    run(
        dir,
        "openssl",
        &[
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", &format!("{name}.key"), "-out", &format!("{name}.pem"), "-days", "3",
            "-subj", &format!("/CN={name}"),
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        ],
    );
}

/// A leaf certificate `name.pem` with key `name.key`, signed by `ca`.
#[rustfmt::skip]
fn make_leaf(dir: &Path, name: &str, ca: &str, extensions: &str) {
    let ext = format!("{name}.ext");
    fs::write(dir.join(&ext), extensions).expect("writing an openssl extension file");
    run(
        dir,
        "openssl",
        &[
            "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", &format!("{name}.key"), "-out", &format!("{name}.csr"),
            "-subj", &format!("/CN={name}"),
        ],
    );
    run(
        dir,
        "openssl",
        &[
            "x509", "-req", "-in", &format!("{name}.csr"), "-CA", &format!("{ca}.pem"),
            "-CAkey", &format!("{ca}.key"), "-CAcreateserial", "-out", &format!("{name}.pem"),
            "-days", "3", "-extfile", &ext,
        ],
    );
}

#[rustfmt::skip]
fn generate() -> Certs {
    // Under cargo's scratch directory (`target/tmp`, cleaned by `cargo
    // clean`), not the system temp dir, where every run would leave one behind.
    let dir = target_dir().join("tmp").join(format!(
        "zklock-certs-{}-{}",
        std::process::id(),
        subsec_nanos()
    ));
    fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    make_ca(&dir, "ca");
    make_ca(&dir, "other-ca");
    let san = "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n";
    make_leaf(
        &dir,
        "server",
        "ca",
        &format!("{san}extendedKeyUsage=serverAuth,clientAuth\n"),
    );
    make_leaf(
        &dir,
        "client",
        "ca",
        &format!("{san}extendedKeyUsage=clientAuth\n"),
    );
    let pass = format!("pass:{STORE_PASSWORD}");
    run(
        &dir,
        "openssl",
        &[
            "pkcs12", "-export", "-in", "server.pem", "-inkey", "server.key", "-certfile",
            "ca.pem", "-name", "server", "-out", "server.p12", "-passout", &pass,
        ],
    );
    run(
        &dir,
        "openssl",
        &[
            "pkcs12", "-export", "-in", "client.pem", "-inkey", "client.key", "-certfile",
            "ca.pem", "-name", "client", "-out", "client.p12", "-passout", &pass,
        ],
    );
    run(
        &dir,
        "keytool",
        &[
            "-importcert", "-noprompt", "-alias", "ca", "-file", "ca.pem", "-keystore",
            "trust.p12", "-storetype", "PKCS12", "-storepass", STORE_PASSWORD,
        ],
    );
    Certs {
        ca_pem: dir.join("ca.pem"),
        other_ca_pem: dir.join("other-ca.pem"),
        client_pem: dir.join("client.pem"),
        client_key: dir.join("client.key"),
        server_keystore: dir.join("server.p12"),
        client_keystore: dir.join("client.p12"),
        truststore: dir.join("trust.p12"),
        dir,
    }
}
