//! The crate's own manifest, against what its documentation promises of it.

/// The features on by default, as the manifest's `[features]` table lists
/// them: the `default = [...]` line's names.
fn default_features(manifest: &str) -> Vec<String> {
    let features = manifest
        .split("\n[")
        .find(|section| section.starts_with("features]"))
        .expect("the manifest has a [features] table");
    let line = features
        .lines()
        .find(|line| line.trim_start().starts_with("default"))
        .expect("[features] has a default line");
    let (_, list) = line.split_once('=').expect("default = [...]");
    let list = list.trim().trim_start_matches('[').trim_end_matches(']');
    let mut names: Vec<String> = list
        .split(',')
        .map(|name| name.trim().trim_matches('"').to_owned())
        .filter(|name| !name.is_empty())
        .collect();
    names.sort();
    names
}

/// docs/SECURITY.md's feature table: `sasl` on, `tls` and `kerberos` off, so
/// a program that asks for nothing gets DIGEST-MD5 and no TLS or Kerberos
/// code. A change of the defaults fails here until the table says it too.
#[test]
fn sasl_alone_is_on_by_default_and_tls_and_kerberos_are_off() {
    let manifest = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"));
    assert_eq!(default_features(manifest), ["sasl"]);
}
