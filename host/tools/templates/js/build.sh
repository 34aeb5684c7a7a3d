#!/usr/bin/env bash
# Builds env/{{name}}.wasm from src/ with jco and componentize-js (the versions
# locked in package-lock.json; installed into node_modules the first time,
# which needs the network). Set ENVHOST_JCO to an installed jco (whose
# componentize-js is 0.23.0) to use that one instead.
set -euo pipefail
cd "$(dirname "$0")"

jco=${ENVHOST_JCO:-}
if [[ -z $jco ]]; then
    if [[ ! -x node_modules/.bin/jco ]]; then
        echo "==> installing jco and componentize-js (locked in package-lock.json) into node_modules"
        # `npm install` with the lock, not `npm ci`: both install the locked
        # versions, but npm ci insists on every platform's optional packages.
        npm install --no-audit --no-fund --loglevel=error
    fi
    jco=node_modules/.bin/jco
fi

# The definition is checked when the module is evaluated, at build time: a
# misspelt key or a duplicate command fails here with a sentence.
"$jco" componentize src/plugin.js --bundle --wit wit/v0.2.1 --world-name full-plugin \
    --disable fetch-event --out env/{{name}}.wasm.tmp >/dev/null
mv env/{{name}}.wasm.tmp env/{{name}}.wasm
echo "==> built env/{{name}}.wasm; check it with: envhost check env/{{name}}.wasm --grants env/envhost.toml"
