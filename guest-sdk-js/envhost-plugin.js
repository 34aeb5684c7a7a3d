// Write envhost environments ("plugins") in JavaScript, for componentize-js.
//
// A plugin is a WebAssembly component the envhost host loads from
// `<project>/env/NAME.wasm`: the agent sends it commands and sees its screen
// section after every command. This module hides the component plumbing
// (the world `full-plugin` of `wit/v0.2.1`, the WIT records, snapshots of
// the plugin's state) behind one call, in the declarative style of the
// Rust SDK:
//
//   import { definePlugin, fail, request } from './envhost-plugin.js';
//
//   export const { environment, capabilities, state, screenChanges } = definePlugin({
//     summary: 'A counter that only goes up',
//     state: { count: 0 },                  // kept across traps and restarts
//     screenChanges: 'when-called',         // the screen shows only the state
//     commands: [
//       {
//         signature: 'add <n>',
//         description: 'Add n to the counter.',
//         example: 'add 3',
//         run(call, self) {
//           if (!/^\d+$/.test(call.args)) fail('add needs a number, e.g. `add 3`');
//           self.state.count += Number(call.args);
//           return `Count is now ${self.state.count}`;
//         },
//       },
//     ],
//     screen: (self) => `Count: ${self.state.count}`,
//   });
//
// The host routes by the command's first word (split by the one rule in
// `wit/command-split-cases.json`) and renders each command's help: LONG
// (signature, description, example) until the agent has used it, SHORT
// (signature - summary) after.
//
// What the SDK checks, so that a mistake reads as a sentence and not as the
// toolchain's internals: the definition when the module is evaluated (which
// componentize-js does at build time, so a misspelt key or a duplicate
// command fails the build), and every value a command or `screen` returns,
// at the call: a wrong type (a number, `{ output }` without `success`,
// `max_lines` for `maxLines`) is a failed response naming the command and
// what to return; the instance and its state stay.
//
// State: `self.state` (JSON values) is snapshotted after every command and
// given back to a fresh instance after a trap or a host restart with
// `--resume`. Give `snapshot(self)` / `restore(self, bytes)` for another
// format.
//
// Screen changes (`wit/v0.2.1`): the host asks every plugin for its screen
// after every command to any environment, because a screen may show what
// changes on its own. `screenChanges: 'when-called'` promises that
// `screen(self)` draws only from what the plugin's own calls leave (its
// state): the host then redraws the section only after calling the plugin,
// and a command to another environment no longer waits for it. Leave the
// default, 'any-time', for a screen that shows the time, files in a granted
// directory, a program's progress or anything fetched. Export the fourth
// object, `screenChanges`, whichever the answer: the world requires it.
//
// A command's `run` may be `async` (return a Promise): componentize-js
// runs the event loop until it settles, so `await fetch(...)` works.
// `httpGet(url)` is `fetch` with the failures worded for the agent: a
// host the operator did not list in `allowed-hosts` reads `cannot fetch
// URL: ask the operator to add "ORIGIN" to allowed-hosts in
// env/envhost.toml`.
//
// This module imports nothing from the host (the global `fetch` is the
// engine's), so it runs under node for unit tests; the file helpers that
// reach granted directories are in `envhost-files.js`. `envhost new --lang
// js` copies both next to a plugin's sources.

/** Unicode's White_Space set, spelled out: JavaScript's `\s` also matches
 * U+FEFF and misses U+0085, and the rule must read alike everywhere. */
const WHITESPACE = '\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
const LEADING = new RegExp(`^[${WHITESPACE}]+`);
const TRAILING = new RegExp(`[${WHITESPACE}]+$`);
const ANY = new RegExp(`[${WHITESPACE}]`);
const WORDS = new RegExp(`[${WHITESPACE}]+`);

export const DEFAULT_MAX_LINES = 50;

/** A failed command: its message is the failed response's output, and the
 * state stays as it is. Throw it, or call `fail(message)`. */
export class Fail extends Error {}

/** A mistake in the plugin's own code, found by the SDK. */
export class PluginError extends Error {}

/** Ends the command as failed with `message` (say what went wrong and how
 * to recover). */
export function fail(message) {
  throw new Fail(message);
}

/**
 * A command's `name`, its `args` and its `body`: leading whitespace, blank
 * lines included, is skipped; the name is the first line up to its first
 * whitespace character; the arguments are the rest of that line without
 * leading or trailing whitespace; the body is everything after the first
 * line feed, verbatim (`undefined` without one).
 */
export function splitCommand(text) {
  const rest = text.replace(LEADING, '');
  const newline = rest.indexOf('\n');
  const first = newline === -1 ? rest : rest.slice(0, newline);
  const body = newline === -1 ? undefined : rest.slice(newline + 1);
  const at = first.search(ANY);
  const name = at === -1 ? first : first.slice(0, at);
  const args = at === -1 ? '' : first.slice(at + 1).replace(LEADING, '').replace(TRAILING, '');
  return { name, args, body };
}

/** What a command's `run(call, self)` gets as `call`. */
export class Call {
  constructor(text) {
    const { name, args, body } = splitCommand(text);
    this.name = name;
    this.args = args;
    this.body = body;
    this.text = text;
  }

  /** The arguments split on whitespace. */
  words() {
    return this.args === '' ? [] : this.args.split(WORDS);
  }

  /** The `index`-th argument word, or undefined. */
  arg(index) {
    return this.words()[index];
  }

  /** The arguments after the first `count` words (`put key a value` gives
   * `a value` for 1). */
  rest(count = 1) {
    let rest = this.args;
    for (let i = 0; i < count; i++) {
      const at = rest.search(ANY);
      rest = at === -1 ? '' : rest.slice(at).replace(LEADING, '');
    }
    return rest;
  }
}

/** Requests: powers the plugin asks the operator for, with the reason
 * shown to the operator (asking grants nothing). */
export const request = {
  /** Read a directory of the project (seen at `/` + its path). */
  readDirectory: (path, reason) => ({ power: { tag: 'read-directory', val: path }, reason }),
  /** Read and write a directory of the project. */
  writeDirectory: (path, reason) => ({ power: { tag: 'write-directory', val: path }, reason }),
  /** See one of the host's environment variables. */
  variable: (name, reason) => ({ power: { tag: 'variable', val: name }, reason }),
  /** Run a program interactively. */
  program: (program, reason) => ({ power: { tag: 'program', val: program }, reason }),
  /** Use up to `bytes` of memory (a number or a BigInt). */
  memory: (bytes, reason) => ({ power: { tag: 'memory', val: BigInt(bytes) }, reason }),
  /** Send HTTP requests to destinations matching `pattern`, as the operator
   * writes it in `allowed-hosts` (`https://api.github.com`); see
   * docs/plugin-network.md. */
  network: (pattern, reason) => ({ power: { tag: 'network', val: pattern }, reason }),
};

const PLUGIN_KEYS = ['name', 'summary', 'commands', 'requests', 'state', 'screen', 'maxLines', 'screenChanges', 'snapshot', 'restore', 'shutdown'];
const COMMAND_KEYS = ['signature', 'description', 'summary', 'example', 'simple', 'run'];
const POWERS = ['read-directory', 'write-directory', 'variable', 'program', 'memory', 'network'];
/** The cases of the WIT enum `when` (interface `screen-changes`), as jco
 * spells them. */
const WHEN = ['any-time', 'when-called'];

/** What the file helpers need to word a refused access: the plugin's name
 * and requests, set by `definePlugin`. */
export const current = { name: '', requests: [] };

function shown(value) {
  let text;
  try {
    text = typeof value === 'string' ? JSON.stringify(value) : typeof value === 'bigint' ? `${value}n` : JSON.stringify(value);
  } catch {
    text = String(value);
  }
  if (text === undefined) text = String(value);
  if (text.length > 60) text = `${text.slice(0, 57)}...`;
  const kind = value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value === 'object' ? 'an object' : `a ${typeof value}`;
  return value === undefined ? 'undefined' : `${kind} ${text}`;
}

function unknownKeys(object, allowed, where) {
  for (const key of Object.keys(object)) {
    if (!allowed.includes(key)) {
      const plain = (k) => k.toLowerCase().replace(/_/g, '');
      const near = allowed.find((k) => plain(k) === plain(key)) ?? allowed.find((k) => distance(plain(k), plain(key)) <= 2);
      throw new PluginError(
        `${where} has a key \`${key}\` the SDK does not know` +
          (near ? `; did you mean \`${near}\`?` : `; the keys are ${allowed.join(', ')}`),
      );
    }
  }
}

/** Levenshtein distance, for "did you mean" (short keys only). */
function distance(a, b) {
  let row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) {
      next[j] = Math.min(row[j] + 1, next[j - 1] + 1, row[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    row = next;
  }
  return row[b.length];
}

function checkCommands(commands) {
  if (!Array.isArray(commands)) {
    throw new PluginError(`\`commands\` is ${shown(commands)}; it must be an array of { signature, description, run }`);
  }
  const names = new Map();
  return commands.map((command, index) => {
    const where = `command ${index + 1}${typeof command?.signature === 'string' ? ` (\`${command.signature}\`)` : ''}`;
    if (typeof command !== 'object' || command === null) {
      throw new PluginError(`${where} is ${shown(command)}; it must be an object { signature, description, run }`);
    }
    unknownKeys(command, COMMAND_KEYS, where);
    for (const key of ['signature', 'description']) {
      if (typeof command[key] !== 'string') throw new PluginError(`the \`${key}\` of ${where} is ${shown(command[key])}; it must be a string`);
    }
    for (const key of ['summary', 'example']) {
      if (command[key] !== undefined && typeof command[key] !== 'string') {
        throw new PluginError(`the \`${key}\` of ${where} is ${shown(command[key])}; it must be a string or left out`);
      }
    }
    if (command.simple !== undefined && typeof command.simple !== 'boolean') {
      throw new PluginError(`the \`simple\` of ${where} is ${shown(command.simple)}; it must be true, false or left out`);
    }
    if (typeof command.run !== 'function') {
      throw new PluginError(`${where} has no \`run(call, self)\` function; it is ${shown(command.run)}`);
    }
    const name = splitCommand(command.signature).name;
    if (name === '') throw new PluginError(`${where} has an empty signature; write how to call it, e.g. \`get <key>\``);
    if (names.has(name)) {
      throw new PluginError(`two commands are named \`${name}\` (commands ${names.get(name)} and ${index + 1}); the first word of each signature must be unique`);
    }
    names.set(name, index + 1);
    return { ...command, name };
  });
}

function checkScreenChanges(when) {
  if (when === undefined) return 'any-time';
  if (WHEN.includes(when)) return when;
  const plain = typeof when === 'string' ? when.toLowerCase().replace(/[^a-z]/g, '') : '';
  const near = WHEN.find((w) => w.replace(/-/g, '') === plain);
  throw new PluginError(
    `the plugin's \`screenChanges\` is ${shown(when)}; it must be 'any-time' (the default: the screen may change ` +
      "between the plugin's calls, e.g. it shows the time, files or a program's progress) or 'when-called' (the " +
      "screen shows only what the plugin's own calls leave)" +
      (near ? `; did you mean '${near}'?` : ''),
  );
}

function checkRequests(requests) {
  if (!Array.isArray(requests)) throw new PluginError(`\`requests\` is ${shown(requests)}; it must be an array of request.readDirectory(...) etc.`);
  for (const r of requests) {
    const tag = r?.power?.tag;
    if (!POWERS.includes(tag) || typeof r.reason !== 'string') {
      throw new PluginError(`\`requests\` holds ${shown(r)}; use request.readDirectory, writeDirectory, variable, program, memory or network, with a reason`);
    }
    const want = tag === 'memory' ? 'bigint' : 'string';
    if (typeof r.power.val !== want) throw new PluginError(`the ${tag} request's value is ${shown(r.power.val)}; it must be ${want === 'bigint' ? 'a number of bytes' : 'a string'}`);
  }
  return requests;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function jsonCopy(value, what) {
  try {
    return JSON.parse(JSON.stringify(value));
  } catch (error) {
    throw new PluginError(`${what} cannot be saved as JSON (${error.message}); keep only JSON values in it, or give snapshot() and restore()`);
  }
}

/**
 * Checks a plugin's definition and returns the objects the component
 * exports for the world `full-plugin`: `{ environment, capabilities, state,
 * screenChanges }`. A mistake in the definition throws a `PluginError`
 * here, at build time.
 *
 * `definition`: `summary` (one line), `commands` (`{ signature,
 * description, summary?, example?, simple?, run(call, self) }`, where `run` may be async), and
 * optionally `name` (the .wasm file's stem, used in the sentences naming a
 * grant), `requests`, `state` (the initial JSON state), `screen(self)`
 * (a string, or `{ content, maxLines }`), `maxLines`, `screenChanges`
 * ('any-time', the default, or 'when-called'), `snapshot(self)` /
 * `restore(self, bytes)`, `shutdown(self)`.
 */
export function definePlugin(definition) {
  if (typeof definition !== 'object' || definition === null) {
    throw new PluginError(`definePlugin takes an object { summary, commands, ... }, not ${shown(definition)}`);
  }
  unknownKeys(definition, PLUGIN_KEYS, 'the plugin definition');
  const { summary } = definition;
  if (typeof summary !== 'string' || summary.trim() === '') {
    throw new PluginError(`the plugin's \`summary\` is ${shown(summary)}; set it to one line saying what the environment is for`);
  }
  const commands = checkCommands(definition.commands);
  const byName = new Map(commands.map((c) => [c.name, c]));
  const requests = checkRequests(definition.requests ?? []);
  for (const key of ['screen', 'snapshot', 'restore', 'shutdown']) {
    if (definition[key] !== undefined && typeof definition[key] !== 'function') {
      throw new PluginError(`the plugin's \`${key}\` is ${shown(definition[key])}; it must be a function or left out`);
    }
  }
  const when = checkScreenChanges(definition.screenChanges);
  const initial = jsonCopy(definition.state ?? null, "the plugin's initial `state`");
  current.name = definition.name ?? '';
  current.requests = requests;

  const self = { state: jsonCopy(initial, 'state') };
  let lastSnapshot;

  const takeSnapshot = () => {
    if (definition.snapshot) {
      const bytes = definition.snapshot(self);
      if (!(bytes instanceof Uint8Array)) throw new PluginError(`snapshot() returned ${shown(bytes)}; it must return a Uint8Array`);
      return bytes;
    }
    if (self.state === null || self.state === undefined) return new Uint8Array();
    return encoder.encode(JSON.stringify(self.state));
  };

  const response = (command, value) => {
    if (typeof value === 'string') return { output: value, success: true };
    if (value && typeof value === 'object' && typeof value.output === 'string' && typeof value.success === 'boolean' && Object.keys(value).length === 2) {
      return value;
    }
    const message =
      `the plugin's command \`${command.name}\` returned ${shown(value)}, not the output: its run() must return ` +
      'a string (the output), return { output, success } (a string and a boolean), or call fail(message). ' +
      'This is a bug in the plugin; its state is unchanged by this answer.';
    console.error(message);
    return { output: message, success: false };
  };

  // A thrown `Fail` is the failed answer; anything else is a bug and traps
  // (the host restores the last snapshot into a fresh instance).
  const failed = (error) => {
    if (!(error instanceof Fail)) throw error;
    return { output: error.message, success: false };
  };

  // The host asks for the snapshot right after the command: take it now,
  // so that state that cannot be saved is reported with the command that
  // made it so.
  const finished = (answer) => {
    try {
      lastSnapshot = takeSnapshot();
    } catch (error) {
      const message =
        `The plugin's state cannot be saved (${error.message}); keep only JSON values in self.state, or give ` +
        'snapshot() and restore(). Until then the state will not survive a crash or a restart.';
      console.error(message);
      return { output: `${answer.output}\n(${message})`.replace(/^\n/, ''), success: answer.success };
    }
    return answer;
  };

  const environment = {
    describe() {
      return {
        summary,
        commands: commands.map((c) => ({
          signature: c.signature,
          description: c.description,
          summary: c.summary,
          example: c.example ?? '',
          simple: c.simple ?? false,
        })),
      };
    },

    handleCommand(text) {
      const call = new Call(text);
      const command = byName.get(call.name);
      // The host answers unknown names itself; this is for one that does not.
      if (!command) return { output: `Unknown command: ${call.name}\nAvailable: ${[...byName.keys()].join(', ')}`, success: false };
      let value;
      try {
        value = command.run(call, self);
      } catch (error) {
        return finished(failed(error));
      }
      // An async command: componentize-js runs the event loop until the
      // promise settles and answers the host with its value.
      if (typeof value?.then === 'function') {
        return Promise.resolve(value).then(
          (settled) => finished(response(command, settled)),
          (error) => finished(failed(error)),
        );
      }
      return finished(response(command, value));
    },

    getScreen() {
      const value = definition.screen ? definition.screen(self) : summary;
      const maxLines = definition.maxLines ?? DEFAULT_MAX_LINES;
      if (typeof value?.then === 'function') {
        return badScreen('screen() returned a Promise; only commands may be async: keep what the screen shows in self.state');
      }
      if (typeof value === 'string') return { content: value, maxLines: checkedLines(maxLines) };
      if (value && typeof value === 'object' && typeof value.content === 'string') {
        if ('max_lines' in value) {
          return badScreen(`screen() returned an object with \`max_lines\`; the field is \`maxLines\` (camelCase)`);
        }
        unknownKeysScreen(value);
        return { content: value.content, maxLines: checkedLines(value.maxLines ?? maxLines) };
      }
      return badScreen(`screen() returned ${shown(value)}; it must return a string, or { content, maxLines }`);
    },

    shutdown() {
      definition.shutdown?.(self);
    },
  };

  const capabilities = {
    requested() {
      return requests;
    },
  };

  const state = {
    snapshot() {
      if (lastSnapshot === undefined) {
        try {
          lastSnapshot = takeSnapshot();
        } catch (error) {
          console.error(`The plugin's state cannot be saved: ${error.message}`);
          return new Uint8Array();
        }
      }
      return lastSnapshot;
    },

    restore(bytes) {
      if (definition.restore) {
        try {
          definition.restore(self, bytes);
        } catch (error) {
          throw error instanceof Fail ? error.message : `the plugin could not take back its snapshot: ${error.message}`;
        }
      } else if (bytes.length > 0) {
        try {
          self.state = JSON.parse(decoder.decode(bytes));
        } catch (error) {
          // A thrown string is the `err` of restore's result.
          throw `the snapshot is not the JSON this plugin writes (${error.message})`;
        }
      }
      lastSnapshot = undefined;
    },
  };

  // `screen-changes`: the host asks once per fresh instance.
  const screenChanges = {
    screenChanges() {
      return when;
    },
  };

  return { environment, capabilities, state, screenChanges };
}

function checkedLines(value) {
  if (Number.isInteger(value) && value > 0 && value < 2 ** 32) return value;
  console.error(`maxLines is ${shown(value)}; it must be a positive integer (using ${DEFAULT_MAX_LINES})`);
  return DEFAULT_MAX_LINES;
}

function unknownKeysScreen(value) {
  for (const key of Object.keys(value)) {
    if (key !== 'content' && key !== 'maxLines') console.error(`screen() returned an unknown key \`${key}\` (ignored); the keys are content and maxLines`);
  }
}

function badScreen(message) {
  const text = `${message}. This is a bug in the plugin.`;
  console.error(text);
  return { content: text, maxLines: DEFAULT_MAX_LINES };
}

/** The sentence for a file access the sandbox refused: which directory to
 * ask the operator for, and how; undefined when the error is the file's
 * own. `granted` says whether the directory is granted at all. */
export function grantHint(directory, { writing, granted }) {
  if (!directory) return undefined;
  const name = current.name || 'NAME';
  const wantsWrite = writing || current.requests.some((r) => r.power.tag === 'write-directory' && r.power.val === directory);
  const grant = `([plugins.${name}] ${wantsWrite ? 'read-write' : 'read-only'} = ["${directory}"])`;
  if (!granted) return `ask the operator to grant ${directory} in env/envhost.toml ${grant}`;
  if (writing) return `not permitted; if ${directory} is granted read-only, ask the operator to grant it read-write in env/envhost.toml ${grant}`;
  return undefined;
}

/** The project directory `path` lies in: the longest requested directory
 * that holds it, else its first component. */
export function directoryOf(path) {
  const relative = path.replace(/^\/+/, '').replace(/\/+$/, '');
  if (relative === '' || relative === '.') return '';
  let best = '';
  for (const r of current.requests) {
    if (r.power.tag !== 'read-directory' && r.power.tag !== 'write-directory') continue;
    const wanted = r.power.val.replace(/^\/+/, '').replace(/\/+$/, '');
    if ((relative === wanted || relative.startsWith(`${wanted}/`)) && wanted.length > best.length) best = wanted;
  }
  return best || relative.split('/')[0];
}

// --- Outgoing HTTP ----------------------------------------------------------
//
// The engine's `fetch` goes through the host's `wasi:http/outgoing-handler`,
// which refuses every destination the operator did not list in
// `allowed-hosts` (docs/plugin-network.md). StarlingMonkey, the engine
// componentize-js embeds, drops the WASI error code on the way: a request
// the host refuses before sending it rejects with a plain `Error`
// "fetch_https: An error occurred while using the host API.", and a request
// that got no response (no connection, an unknown name, a timeout) with
// the `TypeError` "NetworkError when attempting to fetch resource". The
// host refuses a request before sending it for two reasons only: its
// destination is not granted, or the plugin already has
// MAX_REQUESTS_IN_FLIGHT requests in flight, which `httpGet` tells apart by
// counting its own.

/** `text` without its trailing whitespace, by the set the host splits
 * commands with (Unicode's White_Space; `String.prototype.trimEnd` also
 * takes U+FEFF and leaves U+0085), so a value reads alike in every
 * language. */
export function trimEnd(text) {
  return text.replace(TRAILING, '');
}

/** The largest body `httpGet` keeps unless told otherwise. */
export const DEFAULT_MAX_BODY = 1024 * 1024;

/** The host's bound on a plugin's requests in flight (docs/plugin-network.md). */
export const MAX_REQUESTS_IN_FLIGHT = 8;

const HOST_REFUSED = 'An error occurred while using the host API';

let inFlight = 0;

/** The `URL` of an `http(s)` URL; a `Fail` with the sentence otherwise. */
function parsedUrl(url) {
  let parsed;
  try {
    parsed = new URL(url);
  } catch {
    throw new Fail(`cannot fetch ${url}: a URL starts with http:// or https://`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new Fail(`cannot fetch ${url}: only http:// and https:// URLs can be fetched`);
  }
  if (parsed.hostname === '') throw new Fail(`cannot fetch ${url}: the URL names no host`);
  // The host refuses them (as no grant could name them); say why here.
  if (parsed.username !== '' || parsed.password !== '') {
    throw new Fail(`cannot fetch ${url}: a URL holds no user name or password; send credentials in a header`);
  }
  return parsed;
}

/** `scheme://host[:port]` of an `http(s)` URL as `allowed-hosts` writes it
 * (lower case, the port only when it is not the scheme's default):
 * `https://example.com`, `http://127.0.0.1:9`. Throws `Fail` for anything
 * else. */
export function originOf(url) {
  return parsedUrl(url).origin;
}

/**
 * The `Fail` to throw for an error `fetch(url)` rejected with: a request
 * the host refused names the grant to ask for (`cannot fetch URL: ask the
 * operator to add "ORIGIN" to allowed-hosts in env/envhost.toml`); any
 * other failure says what happened. For plugins that call `fetch`
 * themselves (another method, a body):
 *
 *   try { response = await fetch(url, { method: 'POST', body }); }
 *   catch (error) { throw fetchError(url, error); }
 */
export function fetchError(url, error) {
  return failure(url, error, inFlight);
}

/** `fetchError` for a request sent while `others` of `httpGet`'s were in
 * flight. */
function failure(url, error, others) {
  if (error instanceof Fail) return error;
  const message = String(error?.message ?? error);
  if (!(error instanceof TypeError) && message.includes(HOST_REFUSED)) {
    if (others >= MAX_REQUESTS_IN_FLIGHT) {
      return new Fail(
        `cannot fetch ${url}: ${others} requests are already in flight, the most a plugin may have at once; ` +
          'send this one when one of them has ended',
      );
    }
    let origin;
    try {
      origin = originOf(url);
    } catch (bad) {
      return bad;
    }
    return new Fail(`cannot fetch ${url}: ask the operator to add "${origin}" to allowed-hosts in env/envhost.toml`);
  }
  if (error instanceof TypeError && /^URL constructor:|not a valid URL|Invalid URL/.test(message)) {
    return new Fail(`cannot fetch ${url}: a URL starts with http:// or https://`);
  }
  // node says which (`cause.code`); StarlingMonkey does not.
  const code = typeof error?.cause?.code === 'string' ? ` (${error.cause.code})` : '';
  if (error instanceof TypeError) {
    return new Fail(`cannot fetch ${url}: no response${code}: the connection failed, the name is unknown or it timed out`);
  }
  return new Fail(`cannot fetch ${url}: ${message.trim()}`);
}

/** `64 KiB`, `1.5 MiB`, `100 bytes`. */
function sizeText(bytes) {
  const KIB = 1024;
  const MIB = 1024 * KIB;
  if (bytes >= MIB) return bytes % MIB === 0 ? `${bytes / MIB} MiB` : `${(bytes / MIB).toFixed(1)} MiB`;
  if (bytes >= KIB) return bytes % KIB === 0 ? `${bytes / KIB} KiB` : `${(bytes / KIB).toFixed(1)} KiB`;
  return `${bytes} bytes`;
}

/** The whole body, failing as soon as it passes `maxBytes` (nothing more
 * is read). */
async function bodyAtMost(url, response, maxBytes) {
  const tooLarge = () => new Fail(`cannot fetch ${url}: its body is larger than ${sizeText(maxBytes)}, the most this plugin keeps`);
  const declared = Number(response.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > maxBytes) {
    await response.body?.cancel().catch(() => {});
    throw tooLarge();
  }
  const reader = response.body?.getReader();
  if (!reader) return new Uint8Array();
  const chunks = [];
  let size = 0;
  for (;;) {
    let chunk;
    try {
      chunk = await reader.read();
    } catch (error) {
      throw new Fail(`cannot fetch ${url}: the body broke off (${String(error?.message ?? error).trim()})`);
    }
    if (chunk.done) break;
    size += chunk.value.length;
    if (size > maxBytes) {
      await reader.cancel().catch(() => {});
      throw tooLarge();
    }
    chunks.push(chunk.value);
  }
  const body = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    body.set(chunk, at);
    at += chunk.length;
  }
  return body;
}

/**
 * `GET url` through the host, the whole body read: `{ status, headers,
 * body, text() }` (`body` a Uint8Array, `text()` it decoded as UTF-8,
 * invalid bytes replaced). Any status is an answer: check it. Throws
 * `Fail` with a sentence for the agent when there is no answer: a host
 * not granted (`cannot fetch URL: ask the operator to add "ORIGIN" to
 * allowed-hosts in env/envhost.toml`), no connection, a body larger than
 * `maxBytes` (1 MiB unless given). Use it from an `async` command:
 *
 *   async run(call) {
 *     const response = await httpGet(call.args);
 *     if (response.status !== 200) fail(`GET ${call.args} answered ${response.status}`);
 *     return response.text();
 *   }
 */
export async function httpGet(url, { maxBytes = DEFAULT_MAX_BODY, headers } = {}) {
  parsedUrl(url);
  // The host counts a request from its sending to the end of its body.
  const others = inFlight;
  inFlight++;
  try {
    let response;
    try {
      response = await fetch(url, { headers });
    } catch (error) {
      throw failure(url, error, others);
    }
    const body = await bodyAtMost(url, response, maxBytes);
    return { status: response.status, headers: response.headers, body, text: () => decoder.decode(body) };
  } finally {
    inFlight--;
  }
}
