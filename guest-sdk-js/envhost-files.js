// Files in the directories the operator granted, for envhost plugins in
// JavaScript (componentize-js), over `wasi:filesystem/preopens` and
// `wasi:filesystem/types` of the world `full-plugin` (`wit/v0.2.1`).
//
// A directory granted in `env/envhost.toml` (`read-write = ["notes"]`) is a
// preopen named `/notes`; paths here are relative to the project (`notes/
// todo.txt`; a leading `/` is allowed). A refused access throws `Fail` with
// the sentence naming the grant to ask for, e.g. `cannot write notes/a.txt:
// ask the operator to grant notes in env/envhost.toml ([plugins.kv]
// read-write = ["notes"])`, which a command's `run` may let through: the
// agent gets it as the failed command's output.
//
// This module imports the host's WASI, so it runs only inside the
// component; the logic to unit-test under node belongs elsewhere.

import { getDirectories } from 'wasi:filesystem/preopens@0.2.12';
import { Fail, directoryOf, grantHint } from './envhost-plugin.js';

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const CHUNK = 65536n;

/** [descriptor, path inside it] for a project path, or undefined when no
 * granted directory holds it. */
function locate(path) {
  const relative = path.replace(/^\/+/, '');
  let found;
  for (const [descriptor, name] of getDirectories()) {
    const root = name.replace(/^\/+/, '').replace(/\/+$/, '');
    const inside = root === '' || root === '.' ? relative : relative === root ? '.' : relative.startsWith(`${root}/`) ? relative.slice(root.length + 1) : undefined;
    if (inside !== undefined && (!found || root.length > found.root.length)) found = { descriptor, inside, root };
  }
  return found;
}

function code(error) {
  return typeof error?.payload === 'string' ? error.payload : typeof error === 'string' ? error : undefined;
}

const REFUSED = ['access', 'not-permitted', 'read-only'];

function refused(verb, path, error, writing) {
  const what = code(error);
  if (what === undefined) throw error;
  const hint = REFUSED.includes(what) ? grantHint(directoryOf(path), { writing, granted: true }) : undefined;
  throw new Fail(`cannot ${verb} ${path}: ${hint ?? what.replace(/-/g, ' ')}`);
}

function open(verb, path, openFlags, flags, writing) {
  const found = locate(path);
  if (!found) {
    throw new Fail(`cannot ${verb} ${path}: ${grantHint(directoryOf(path), { writing, granted: false }) ?? 'not in a granted directory'}`);
  }
  try {
    return found.descriptor.openAt({ symlinkFollow: false }, found.inside, openFlags, flags);
  } catch (error) {
    return refused(verb, path, error, writing);
  }
}

/** Whether a granted directory holds `path` (a project path). */
export function isGranted(path) {
  return locate(path) !== undefined;
}

/** The text of a file, as UTF-8. */
export function readText(path) {
  const file = open('read', path, {}, { read: true }, false);
  const chunks = [];
  let offset = 0n;
  try {
    for (;;) {
      const [bytes, end] = file.read(CHUNK, offset);
      chunks.push(bytes);
      offset += BigInt(bytes.length);
      if (end || bytes.length === 0) break;
    }
  } catch (error) {
    refused('read', path, error, false);
  }
  const all = new Uint8Array(Number(offset));
  let at = 0;
  for (const chunk of chunks) {
    all.set(chunk, at);
    at += chunk.length;
  }
  return decoder.decode(all);
}

/** Writes `text` to a file (UTF-8), replacing what it held. */
export function writeText(path, text) {
  const file = open('write', path, { create: true, truncate: true }, { write: true }, true);
  const bytes = encoder.encode(text);
  let offset = 0;
  try {
    while (offset < bytes.length) {
      offset += Number(file.write(bytes.subarray(offset), BigInt(offset)));
    }
  } catch (error) {
    refused('write', path, error, true);
  }
}

/** The names in a directory, sorted. */
export function listNames(path) {
  const directory = open('list', path, { directory: true }, { read: true }, false);
  const names = [];
  try {
    const stream = directory.readDirectory();
    for (let entry = stream.readDirectoryEntry(); entry; entry = stream.readDirectoryEntry()) names.push(entry.name);
  } catch (error) {
    refused('list', path, error, false);
  }
  return names.sort();
}
