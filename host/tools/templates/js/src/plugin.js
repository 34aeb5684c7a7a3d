// The `{{name}}` environment: keys and values an agent keeps while it
// works, and notes it saves as files, as an envhost plugin written in
// JavaScript.
//
// - `put`, `get`, `del`: values live in `self.state`, which the SDK
//   snapshots after every command, so they survive a crash of the plugin
//   and a restart of the host (`envhost serve --resume`);
// - `save`, `show`: notes are files in the project's `notes/` directory,
//   which the operator grants in env/envhost.toml (`read-write =
//   ["notes"]`); `envhost-files.js` reaches it;
// - `fetch`: stores what a URL answers as a value, from the hosts the
//   operator allows (`allowed-hosts` in env/envhost.toml; every other host
//   is refused with the grant to ask for). The command is `async`: the
//   SDK's `httpGet` awaits the engine's `fetch`.
//
// Build with `./build.sh`; test with `envhost test
// env/{{name}}.wasm tests/{{name}}.session --grants env/envhost.toml`.

import { definePlugin, fail, httpGet, originOf, request, trimEnd } from './envhost-plugin.js';
import { isGranted, listNames, readText, writeText } from './envhost-files.js';

const NOTES = 'notes';
// The most `fetch` keeps of a body: a value is for the agent to read.
const FETCHED_AT_MOST = 64 * 1024;

function notePath(name) {
  if (!name || name.includes('/') || name === '.' || name === '..') fail("a note's name is a file name, e.g. `todo.txt`");
  return `${NOTES}/${name}`;
}

// The world `full-plugin` (wit/v0.2.1) wants all four objects exported.
export const { environment, capabilities, state, screenChanges } = definePlugin({
  name: '{{name}}',
  summary: 'Keys and values kept for the agent, and notes saved as files in notes/',
  requests: [
    request.writeDirectory(NOTES, "saves the agent's notes there as files"),
    // Shown to the operator, never applied: the grant is theirs to write.
    request.network('https://example.com', 'fetches the URLs the agent asks for'),
  ],
  // JSON values only: the SDK snapshots this after every command.
  state: { entries: {} },
  // The screen lists the files in notes/, which change without this plugin
  // (the agent's editor, bash): 'any-time', the default. A screen drawn only
  // from self.state would say 'when-called', and the host would stop asking
  // for it after other environments' commands.
  screenChanges: 'any-time',
  commands: [
    {
      signature: 'put <key> <value>',
      description: 'Store a value under a key (the value may contain spaces).\nValues survive a crash of the plugin and a restart of the host.',
      summary: 'Store a value under a key',
      example: 'put colour blue',
      run(call, self) {
        const key = call.arg(0);
        const value = call.rest(1);
        if (!key || !value) fail('put needs a key and a value, e.g. `put colour blue`');
        self.state.entries[key] = value;
        return `stored ${key}`;
      },
    },
    {
      signature: 'get <key>',
      description: 'Show the value stored under a key.',
      example: 'get colour',
      run(call, self) {
        if (!Object.hasOwn(self.state.entries, call.args)) fail(`no key named ${call.args}; the screen lists the keys`);
        return self.state.entries[call.args];
      },
    },
    {
      signature: 'del <key>',
      description: 'Forget a key.',
      simple: true,
      run(call, self) {
        if (!Object.hasOwn(self.state.entries, call.args)) fail(`no key named ${call.args}`);
        delete self.state.entries[call.args];
        return `deleted ${call.args}`;
      },
    },
    {
      signature: 'save <file>',
      description: 'Save the lines after the command as a note, notes/<file> in the project\n(replacing a note of that name).',
      summary: 'Save the following lines as notes/<file>',
      example: 'save todo.txt\nbuy milk\ncall Ada',
      run(call) {
        const lines = (call.body ?? '').split('\n').filter((line, i, all) => i < all.length - 1 || line !== '');
        writeText(notePath(call.args), lines.map((line) => `${line}\n`).join(''));
        return `saved ${NOTES}/${call.args} (${lines.length} lines)`;
      },
    },
    {
      signature: 'show <file>',
      description: 'Show a note.',
      example: 'show todo.txt',
      run: (call) => readText(notePath(call.args)),
    },
    {
      signature: 'fetch <key> <url>',
      description:
        'GET a URL and store its body (text, at most 64 KiB) under a key.\n' +
        'Only hosts the operator allows are reached: `allowed-hosts` in\n' +
        'env/envhost.toml (see docs/plugin-network.md).',
      summary: 'Fetch a URL from an allowed host and store its body under a key',
      example: 'fetch readme https://example.com/',
      async run(call, self) {
        const [key, url, extra] = call.words();
        if (!key || !url || extra) fail('fetch needs a key and a URL, e.g. `fetch readme https://example.com/`');
        // A host not in allowed-hosts fails here, with the sentence naming
        // the grant: `cannot fetch URL: ask the operator to add ...`.
        const response = await httpGet(url, { maxBytes: FETCHED_AT_MOST });
        if (response.status < 200 || response.status > 299) fail(`GET ${url} answered ${response.status}`);
        self.state.entries[key] = trimEnd(response.text());
        return `stored ${key} (${response.body.length} bytes from ${originOf(url)})`;
      },
    },
  ],
  screen(self) {
    const keys = Object.keys(self.state.entries).sort();
    const lines = [keys.length ? `Keys (${keys.length}): ${keys.join(', ')}` : 'Keys: (none)'];
    if (isGranted(NOTES)) {
      const notes = listNames(NOTES).filter((name) => !name.startsWith('.'));
      lines.push(`Notes in ${NOTES}/: ${notes.length ? notes.join(', ') : '(none)'}`);
    } else {
      lines.push(`Notes: ${NOTES}/ is not granted; the operator grants it in env/envhost.toml`);
    }
    return lines.join('\n');
  },
});
