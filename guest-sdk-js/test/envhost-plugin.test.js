// The JavaScript SDK under node: the splitting rule every implementation
// shares, routing, typed responses checked at the call, the definition
// checked when the module is evaluated, state snapshots, and the sentences
// for refused file access.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import { Call, Fail, PluginError, current, definePlugin, directoryOf, fail, grantHint, request, splitCommand } from '../envhost-plugin.js';

const kv = () =>
  definePlugin({
    name: 'kv',
    summary: 'A key-value store',
    requests: [request.writeDirectory('notes', 'notes live there'), request.network('https://api.github.com', 'issues')],
    state: { entries: {} },
    commands: [
      {
        signature: 'put <key> <value>',
        description: 'Store a value.',
        example: 'put a 1',
        run(call, self) {
          if (!call.rest(1)) fail('put needs a key and a value');
          self.state.entries[call.arg(0)] = call.rest(1);
          return `stored ${call.arg(0)}`;
        },
      },
      {
        signature: 'get <key>',
        description: 'Show a value.',
        simple: true,
        run(call, self) {
          if (!(call.args in self.state.entries)) throw new Fail(`no key named ${call.args}`);
          return self.state.entries[call.args];
        },
      },
      { signature: 'wrong', description: 'Returns a number.', run: () => 42 },
      { signature: 'half', description: 'Returns output only.', run: () => ({ output: 'x' }) },
      { signature: 'spoil', description: 'A BigInt in the state.', run: (call, self) => { self.state.n = 1n; return 'spoiled'; } },
      { signature: 'boom', description: 'A bug.', run: () => { throw new TypeError('a bug'); } },
    ],
    screen: (self) => ({ content: `Keys: ${Object.keys(self.state.entries).length}`, maxLines: 10 }),
  });

test('every shared splitting case', () => {
  const { cases } = JSON.parse(readFileSync(new URL('../../wit/command-split-cases.json', import.meta.url)));
  assert.ok(cases.length > 20);
  for (const c of cases) {
    const { name, args, body } = splitCommand(c.text);
    assert.deepEqual([name, args, body ?? null], [c.name, c.arguments, c.body], c.why);
  }
  const call = new Call('put key  a\u3000value ');
  assert.deepEqual(call.words(), ['key', 'a', 'value']);
  assert.equal(call.rest(1), 'a\u3000value');
  assert.equal(call.arg(5), undefined);
});

test('describes, routes and answers', () => {
  const { environment, capabilities } = kv();
  const description = environment.describe();
  assert.equal(description.summary, 'A key-value store');
  assert.deepEqual(description.commands[1], { signature: 'get <key>', description: 'Show a value.', summary: undefined, example: '', simple: true });
  assert.deepEqual(environment.handleCommand('put colour light blue'), { output: 'stored colour', success: true });
  assert.deepEqual(environment.handleCommand(' get colour'), { output: 'light blue', success: true });
  assert.deepEqual(environment.handleCommand('get size'), { output: 'no key named size', success: false });
  assert.deepEqual(environment.handleCommand('put a'), { output: 'put needs a key and a value', success: false });
  assert.match(environment.handleCommand('nope').output, /^Unknown command: nope\nAvailable: put, get, wrong/);
  assert.deepEqual(environment.getScreen(), { content: 'Keys: 1', maxLines: 10 });
  assert.deepEqual(capabilities.requested()[1], { power: { tag: 'network', val: 'https://api.github.com' }, reason: 'issues' });
  assert.throws(() => environment.handleCommand('boom'), TypeError, 'a bug traps: the host restores the last snapshot');
});

test('a wrong return is a sentence at the call and keeps the state', () => {
  const { environment } = kv();
  environment.handleCommand('put a 1');
  const wrong = environment.handleCommand('wrong');
  assert.equal(wrong.success, false);
  assert.match(wrong.output, /^the plugin's command `wrong` returned a number 42, not the output: its run\(\) must return a string/);
  assert.match(environment.handleCommand('half').output, /returned an object \{"output":"x"\}/);
  assert.deepEqual(environment.handleCommand('get a'), { output: '1', success: true });
});

test('screens with max_lines or the wrong type are named', () => {
  const screen = (value) => definePlugin({ summary: 's', commands: [], screen: () => value }).environment.getScreen();
  assert.match(screen({ content: 'x', max_lines: 3 }).content, /the field is `maxLines` \(camelCase\)/);
  assert.match(screen(7).content, /^screen\(\) returned a number 7; it must return a string, or \{ content, maxLines \}/);
  assert.deepEqual(screen('plain'), { content: 'plain', maxLines: 50 });
});

test('mistakes in the definition throw when the module is evaluated', () => {
  const cmd = { signature: 'go', description: 'Go.', run: () => '' };
  assert.throws(() => definePlugin({ summary: '', commands: [] }), /the plugin's `summary` is a string ""; set it to one line/);
  assert.throws(() => definePlugin({ summary: 's', commands: [cmd, { ...cmd, signature: 'go <now>' }] }), /two commands are named `go` \(commands 1 and 2\)/);
  assert.throws(() => definePlugin({ summary: 's', commands: [{ ...cmd, desciption: 'x' }] }), /command 1 \(`go`\) has a key `desciption` the SDK does not know; did you mean `description`\?/);
  assert.throws(() => definePlugin({ summary: 's', commands: [{ ...cmd, handler: () => '' }] }), /has a key `handler` the SDK does not know; the keys are signature, description, summary, example, simple, run/);
  assert.throws(() => definePlugin({ summary: 's', commands: [], max_lines: 3 }), /has a key `max_lines` the SDK does not know; did you mean `maxLines`\?/);
  assert.throws(() => definePlugin({ summary: 's', commands: [{ signature: 'go', description: 'x' }] }), /has no `run\(call, self\)` function/);
  assert.throws(() => definePlugin({ summary: 's', commands: [], requests: [{ power: 'network' }] }), PluginError);
  assert.throws(() => definePlugin({ summary: 's', commands: [], state: { n: 1n } }), /initial `state` cannot be saved as JSON/);
});

/** The interfaces a world of wit/v0.2.1 exports, its `include`s followed,
 * in jco's camelCase (`screen-changes` -> `screenChanges`). */
function worldExports(wit, world) {
  const block = new RegExp(`^world ${world} \\{([^}]*)\\}`, 'm').exec(wit);
  assert.ok(block, `no world ${world} in the WIT`);
  const exports = [];
  for (const [, verb, name] of block[1].matchAll(/^\s*(include|export)\s+([\w-]+)\s*;/gm)) {
    if (verb === 'include') exports.push(...worldExports(wit, name));
    else exports.push(name.replace(/-([a-z])/g, (_, c) => c.toUpperCase()));
  }
  return exports;
}

test('definePlugin returns one object for each export of the world full-plugin', () => {
  const wit = readFileSync(new URL('../../wit/v0.2.1/environment.wit', import.meta.url), 'utf8');
  const wanted = worldExports(wit, 'full-plugin');
  assert.ok(wanted.includes('screenChanges'), `${wanted}`);
  assert.deepEqual(Object.keys(kv()).sort(), wanted.sort());
});

test('screenChanges is any-time unless the plugin says when-called', () => {
  const plugin = (extra) => definePlugin({ summary: 's', commands: [], ...extra });
  assert.equal(plugin({}).screenChanges.screenChanges(), 'any-time');
  assert.equal(kv().screenChanges.screenChanges(), 'any-time');
  assert.equal(plugin({ screenChanges: 'any-time' }).screenChanges.screenChanges(), 'any-time');
  const quiet = plugin({ screenChanges: 'when-called', state: { n: 1 }, screen: (self) => `n=${self.state.n}` });
  assert.equal(quiet.screenChanges.screenChanges(), 'when-called');
  assert.equal(quiet.screenChanges.screenChanges(), 'when-called', 'the same answer every time');
  assert.deepEqual(quiet.environment.getScreen(), { content: 'n=1', maxLines: 50 }, 'the screen is drawn as before');
});

test('a screenChanges that is not one of the two answers is refused when the module is evaluated', () => {
  const plugin = (screenChanges) => definePlugin({ summary: 's', commands: [], screenChanges });
  const allowed = /it must be 'any-time' \(the default: .*\) or 'when-called' \(/;
  for (const bad of ['never', true, 3, null, '']) {
    assert.throws(() => plugin(bad), (error) => error instanceof PluginError && allowed.test(error.message), String(bad));
  }
  assert.throws(() => plugin('whenCalled'), /the plugin's `screenChanges` is a string "whenCalled"; .*; did you mean 'when-called'\?$/);
  assert.throws(() => plugin('ANY_TIME'), /did you mean 'any-time'\?$/);
  assert.throws(() => plugin(true), /`screenChanges` is a boolean true; it must be 'any-time'/);
  assert.throws(
    () => definePlugin({ summary: 's', commands: [], screen_changes: 'when-called' }),
    /has a key `screen_changes` the SDK does not know; did you mean `screenChanges`\?/,
  );
});

test('state is snapshotted after each command and restored into a fresh instance', () => {
  const first = kv();
  first.environment.handleCommand('put colour blue');
  const bytes = first.state.snapshot();
  assert.deepEqual(JSON.parse(new TextDecoder().decode(bytes)), { entries: { colour: 'blue' } });
  const fresh = kv();
  fresh.state.restore(bytes);
  assert.deepEqual(fresh.environment.handleCommand('get colour'), { output: 'blue', success: true });
  assert.throws(() => kv().state.restore(new TextEncoder().encode('{')), (thrown) => typeof thrown === 'string' && thrown.startsWith('the snapshot is not the JSON'));
  const spoilt = kv();
  const answer = spoilt.environment.handleCommand('spoil');
  assert.equal(answer.success, true);
  assert.match(answer.output, /^spoiled\n\(The plugin's state cannot be saved/);
});

test('refused file access names the grant to ask for', () => {
  kv();
  assert.equal(current.name, 'kv');
  assert.equal(directoryOf('/notes/todo.txt'), 'notes');
  assert.equal(grantHint('notes', { writing: false, granted: false }), 'ask the operator to grant notes in env/envhost.toml ([plugins.kv] read-write = ["notes"])');
  assert.equal(
    grantHint('notes', { writing: true, granted: true }),
    'not permitted; if notes is granted read-only, ask the operator to grant it read-write in env/envhost.toml ([plugins.kv] read-write = ["notes"])',
  );
  assert.equal(grantHint('notes', { writing: false, granted: true }), undefined);
  definePlugin({ summary: 's', commands: [] });
  assert.equal(grantHint('data', { writing: false, granted: false }), 'ask the operator to grant data in env/envhost.toml ([plugins.NAME] read-only = ["data"])');
});
