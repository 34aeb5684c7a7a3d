// Builds a JavaScript envhost plugin into a WebAssembly component with
// componentize-js: `node build.mjs ENTRY.js OUT.wasm [WIT_DIR]`.
//
// It calls componentize-js directly rather than through `jco componentize`
// because componentize-js resolves `import './x.js'` against the folder it
// runs in, not against the importing file; the `jco componentize` CLI does
// not see the other files at all. So this runs in ENTRY's folder and gives
// the entry by its bare name: a plugin split into modules next to each other
// then builds. WIT_DIR defaults to the repository's `wit/`.

import { mkdir, writeFile } from 'node:fs/promises';
import { basename, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { componentize } from '@bytecodealliance/componentize-js';

const [entry, out, wit] = process.argv.slice(2);
if (!entry || !out) {
  console.error('usage: node build.mjs ENTRY.js OUT.wasm [WIT_DIR]');
  process.exit(2);
}
const here = dirname(fileURLToPath(import.meta.url));
const witPath = resolve(wit ?? resolve(here, '../../wit'));
const outPath = resolve(out);

process.chdir(dirname(resolve(entry)));
const { component } = await componentize({
  sourcePath: basename(entry),
  witPath,
  worldName: 'plugin',
  // The plugin world has no HTTP; without this the component would carry
  // (and import) the fetch machinery.
  disableFeatures: ['http', 'fetch-event'],
});
await mkdir(dirname(outPath), { recursive: true });
await writeFile(outPath, component);
console.log(`${outPath}: ${component.length} bytes`);
