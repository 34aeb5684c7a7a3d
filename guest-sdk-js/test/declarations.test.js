// The type declarations shipped beside the SDK's modules match them: every
// export of a .js is declared in its .d.ts as the same kind (function,
// class, const), nothing is declared that the module does not export, and
// package.json points type checkers at the declarations.
//
// The modules are read as text: envhost-files.js imports the host's WASI
// and cannot be evaluated under node. envhost-plugin.js is also imported,
// so that an export the text scan missed fails the test too.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const sdk = join(dirname(fileURLToPath(import.meta.url)), '..');
const read = (file) => readFileSync(join(sdk, file), 'utf8');

/** name -> kind for every `export function|async function|class|const NAME`. */
function exportsOf(text) {
  const found = new Map();
  const pattern = /^export\s+(?:declare\s+)?(async\s+function|function|class|const|let|interface|type)\s+([A-Za-z_$][\w$]*)/gm;
  for (const [, kind, name] of text.matchAll(pattern)) {
    // Interfaces and types exist only in the declarations.
    if (kind === 'interface' || kind === 'type') continue;
    const plain = kind.startsWith('async') ? 'function' : kind === 'let' ? 'const' : kind;
    // A function declared twice (overloads) is one export.
    if (found.has(name) && found.get(name) !== plain) assert.fail(`${name} is exported as both ${found.get(name)} and ${plain}`);
    found.set(name, plain);
  }
  return found;
}

for (const module of ['envhost-plugin', 'envhost-files']) {
  test(`${module}.d.ts declares exactly what ${module}.js exports, each as the same kind`, () => {
    const code = exportsOf(read(`${module}.js`));
    const declared = exportsOf(read(`${module}.d.ts`));
    assert.ok(code.size > 0, `no exports found in ${module}.js`);
    const undeclared = [...code.keys()].filter((name) => !declared.has(name));
    const extra = [...declared.keys()].filter((name) => !code.has(name));
    assert.deepEqual(undeclared, [], `exported by ${module}.js but not declared in ${module}.d.ts`);
    assert.deepEqual(extra, [], `declared in ${module}.d.ts but not exported by ${module}.js`);
    for (const [name, kind] of code) {
      assert.equal(declared.get(name), kind, `${name} is a ${kind} in ${module}.js but a ${declared.get(name)} in ${module}.d.ts`);
    }
  });
}

test('the text scan finds every export the evaluated envhost-plugin.js has', async () => {
  const module = await import('../envhost-plugin.js');
  assert.deepEqual(Object.keys(module).sort(), [...exportsOf(read('envhost-plugin.js')).keys()].sort());
});

test('package.json points at the declarations and ships them', () => {
  const manifest = JSON.parse(read('package.json'));
  assert.equal(manifest.types, './envhost-plugin.d.ts');
  assert.deepEqual(manifest.exports['.'], { types: './envhost-plugin.d.ts', default: './envhost-plugin.js' });
  assert.deepEqual(manifest.exports['./files'], { types: './envhost-files.d.ts', default: './envhost-files.js' });
  for (const file of ['envhost-plugin.d.ts', 'envhost-files.d.ts']) {
    assert.ok(manifest.files.includes(file), `package.json's files leaves out ${file}`);
    assert.ok(existsSync(join(sdk, file)), `${file} is missing`);
  }
});
