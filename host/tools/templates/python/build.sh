#!/usr/bin/env bash
# Builds env/{{name}}.wasm from src/ with componentize-py (the version pinned,
# with PyPI's hashes, in requirements.txt; installed into .venv the first
# time, which needs the network). Set ENVHOST_COMPONENTIZE_PY to an
# installed componentize-py to use that one instead.
#
# Before componentize runs, `src/envhost_plugin.py check app` imports the
# plugin in this machine's CPython (3.11 or newer) with the generated
# bindings and checks its commands, requests, first screen and snapshot, so
# a mistake reads as a sentence.
set -euo pipefail
cd "$(dirname "$0")"

componentize=${ENVHOST_COMPONENTIZE_PY:-}
if [[ -z $componentize ]]; then
    if ! cmp -s requirements.txt .venv/.installed-requirements.txt 2>/dev/null; then
        echo "==> installing componentize-py (pinned in requirements.txt) into .venv"
        rm -rf .venv
        python3 -m venv .venv
        .venv/bin/pip install --quiet --disable-pip-version-check --require-hashes -r requirements.txt
        cp requirements.txt .venv/.installed-requirements.txt
    fi
    componentize=.venv/bin/componentize-py
fi

rm -rf .bindings
"$componentize" -d wit/v0.2.1 -w full-plugin bindings .bindings
if python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=src:.bindings python3 src/envhost_plugin.py check app
else
    echo "==> skipping the CPython check of the plugin (the bindings need Python 3.11 or newer)"
fi

# componentize-py bundles every file under src/: no caches.
find src -name __pycache__ -type d -prune -exec rm -rf {} +
"$componentize" -d wit/v0.2.1 -w full-plugin componentize -p src app -o env/{{name}}.wasm.tmp
mv env/{{name}}.wasm.tmp env/{{name}}.wasm
echo "==> built env/{{name}}.wasm; check it with: envhost check env/{{name}}.wasm --grants env/envhost.toml"
