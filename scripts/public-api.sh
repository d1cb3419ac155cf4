#!/usr/bin/env bash
# The public API of the library crates (zklock, zklock-proto, zklock-jute), rendered from
# rustdoc's JSON by scripts/public_api.py and compared with the listings
# committed in public-api/<crate>.txt, whose first line names the version.
#
#   scripts/public-api.sh            check (CI): fails if an API changed
#   scripts/public-api.sh --update   rewrite the listings after a change
#
# A change of the public API needs a version bump (below 1.0: the minor
# version for a breaking change) and a CHANGELOG.md entry, then --update.
# Stable Rust writes rustdoc JSON only with RUSTC_BOOTSTRAP=1; that build
# has a target directory of its own so that it never invalidates the others.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=check
case "${1:-}" in
  "") ;;
  --update) mode=update ;;
  *) echo "usage: $0 [--update]" >&2; exit 64 ;;
esac

out=target/public-api
mkdir -p public-api "$out"
failed=0
for crate in zklock zklock-proto zklock-jute; do
  lib=${crate//-/_}
  RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR="$out" cargo rustdoc --quiet -p "$crate" --lib \
    -- -Z unstable-options --output-format json
  version=$(cargo pkgid -p "$crate" | sed 's/.*[#@]//')
  listing="$out/$crate.txt"
  {
    echo "# $crate $version public API; regenerate with scripts/public-api.sh --update"
    python3 scripts/public_api.py "$out/doc/$lib.json"
  } > "$listing"
  committed="public-api/$crate.txt"
  if [ "$mode" = update ]; then
    cp "$listing" "$committed"
    echo "public-api: wrote $committed ($(($(wc -l < "$committed") - 1)) items)" >&2
    continue
  fi
  if [ ! -f "$committed" ]; then
    echo "public-api: $committed is missing; run scripts/public-api.sh --update" >&2
    failed=1
  elif ! diff -u "$committed" "$listing" >&2; then
    was=$(head -n 1 "$committed" | awk '{print $3}')
    if [ "$was" = "$version" ]; then
      echo "public-api: the public API of $crate changed, but its version is still $version:" \
        "bump it in Cargo.toml, say what changed in CHANGELOG.md, then run" \
        "scripts/public-api.sh --update" >&2
    else
      echo "public-api: $crate is now $version (listing says $was): run scripts/public-api.sh --update" >&2
    fi
    failed=1
  else
    echo "public-api: $crate $version unchanged" >&2
  fi
done
exit "$failed"
