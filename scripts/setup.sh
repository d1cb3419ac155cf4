#!/usr/bin/env bash
# Installs what the tests and the demo need, when it is missing:
# ZooKeeper 3.8, Curator and MIT Kerberos from Debian, kazoo from PyPI.
# Idempotent.
set -euo pipefail

need_apt=()
[ -f /usr/share/java/zookeeper.jar ] || need_apt+=(zookeeper)
for jar in curator-recipes curator-framework curator-client; do
  [ -f "/usr/share/java/$jar.jar" ] || need_apt+=("lib$jar-java")
done
command -v java >/dev/null || need_apt+=(default-jre-headless)
command -v javac >/dev/null || need_apt+=(default-jdk-headless)
command -v python3 >/dev/null || need_apt+=(python3 python3-pip)
# Kerberos (feature `kerberos`, tests/kerberos.rs): an MIT KDC, its realm
# tools and kinit for the tests; GSSAPI headers, libclang and pkg-config to
# build the libgssapi binding (bindgen).
[ -x /usr/sbin/krb5kdc ] || need_apt+=(krb5-kdc)
[ -x /usr/sbin/kadmin.local ] || need_apt+=(krb5-admin-server)
command -v kinit >/dev/null || need_apt+=(krb5-user)
[ -f /usr/include/gssapi/gssapi.h ] || need_apt+=(libkrb5-dev)
compgen -G "/usr/lib/llvm-*/lib/libclang.so" >/dev/null || need_apt+=(libclang-dev)
command -v pkg-config >/dev/null || need_apt+=(pkg-config)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]} with apt-get" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
PY="${PYTHON:-python3}"
if ! "$PY" -c "import kazoo" 2>/dev/null; then
  echo "setup: installing kazoo with pip" >&2
  "$PY" -m pip install -q kazoo || "$PY" -m pip install -q --break-system-packages kazoo
fi
# TLS tests make their certificates with openssl (keytool comes with the JDK).
if ! command -v openssl >/dev/null; then
  echo "setup: installing openssl with apt-get" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openssl >/dev/null
fi
