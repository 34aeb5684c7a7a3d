// Write envhost environments ("plugins") in JavaScript, for componentize-js.
//
// A plugin is a WebAssembly component the envhost host loads from
// `<project>/env/NAME.wasm`: the agent sends it commands and sees its screen
// section after every command. This module hides the component plumbing
// (the world `full-plugin` of `wit/v0.2.0`, the WIT records, snapshots of
// the plugin's state) behind one call, in the declarative style of the
// Rust SDK:
//
//   import { definePlugin, fail, request } from './envhost-plugin.js';
//
//   export const { environment, capabilities, state } = definePlugin({
//     summary: 'A counter that only goes up',
//     state: { count: 0 },                  // kept across traps and restarts
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
// This module imports nothing from the host, so it runs under node for
// unit tests; the file helpers that reach granted directories are in
// `envhost-files.js`. `envhost new --lang js` copies both next to a
// plugin's sources.

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

const PLUGIN_KEYS = ['name', 'summary', 'commands', 'requests', 'state', 'screen', 'maxLines', 'snapshot', 'restore', 'shutdown'];
const COMMAND_KEYS = ['signature', 'description', 'summary', 'example', 'simple', 'run'];
const POWERS = ['read-directory', 'write-directory', 'variable', 'program', 'memory', 'network'];

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
 * exports for the world `full-plugin`: `{ environment, capabilities, state }`.
 * A mistake in the definition throws a `PluginError` here, at build time.
 *
 * `definition`: `summary` (one line), `commands` (`{ signature,
 * description, summary?, example?, simple?, run(call, self) }`), and
 * optionally `name` (the .wasm file's stem, used in the sentences naming a
 * grant), `requests`, `state` (the initial JSON state), `screen(self)`
 * (a string, or `{ content, maxLines }`), `maxLines`, `snapshot(self)` /
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
      let answer;
      try {
        answer = response(command, command.run(call, self));
      } catch (error) {
        if (!(error instanceof Fail)) throw error;
        answer = { output: error.message, success: false };
      }
      // The host asks for the snapshot right after the command: take it now,
      // so that state that cannot be saved is reported with the command that
      // made it so.
      try {
        lastSnapshot = takeSnapshot();
      } catch (error) {
        const message =
          `The plugin's state cannot be saved (${error.message}); keep only JSON values in self.state, or give ` +
          'snapshot() and restore(). Until then the state will not survive a crash or a restart.';
        console.error(message);
        answer = { output: `${answer.output}\n(${message})`.replace(/^\n/, ''), success: answer.success };
      }
      return answer;
    },

    getScreen() {
      const value = definition.screen ? definition.screen(self) : summary;
      const maxLines = definition.maxLines ?? DEFAULT_MAX_LINES;
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

  return { environment, capabilities, state };
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
