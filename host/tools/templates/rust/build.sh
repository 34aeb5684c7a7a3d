#!/usr/bin/env bash
# Builds env/{{name}}.wasm with cargo for wasm32-wasip2 (the envhost SDK is
# vendored in envhost-sdk/, its dependencies locked in Cargo.lock; cargo
# fetches them the first time). CARGO_TARGET_DIR is honoured, so several
# plugins may share one build folder.
set -euo pipefail
cd "$(dirname "$0")"

if command -v rustup >/dev/null && ! rustup target list --installed | grep -qx wasm32-wasip2; then
    echo "==> adding the wasm32-wasip2 target (rustup target add wasm32-wasip2)"
    rustup target add wasm32-wasip2
fi
cargo build --release --target wasm32-wasip2
target=${CARGO_TARGET_DIR:-target}
cp "$target/wasm32-wasip2/release/{{name}}.wasm" env/{{name}}.wasm.tmp
mv env/{{name}}.wasm.tmp env/{{name}}.wasm
echo "==> built env/{{name}}.wasm; check it with: envhost check env/{{name}}.wasm --grants env/envhost.toml"
