// Unit tests of the regex workbench and the command parsing, on the
// machine's own node: `node --test plugins/regex/test/` (scripts/test runs
// them). The component itself is tested through the host in
// tests/e2e/polyglot.rs.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import * as plugin from '../src/plugin.js';
import { makeEnvironment, makeState, splitCommand } from '../src/plugin.js';
import {
  MAX_SAMPLES,
  SNAPSHOT_VERSION,
  SnapshotError,
  UsageError,
  Workbench,
  allMatches,
  escapeLiteral,
  groupNames,
  parsePattern,
} from '../src/workbench.js';

test('patterns are read as /source/flags or as a bare source', () => {
  assert.equal(String(parsePattern('/a b/gi')), '/a b/gi');
  assert.equal(String(parsePattern('  a/b  ')), '/a\\/b/');
  assert.throws(() => parsePattern('/x/q'), { message: 'Unknown flag q: JavaScript knows d g i m s u v y.' });
  assert.throws(() => parsePattern('['), UsageError);
  assert.throws(() => parsePattern('   '), /pattern needs a regular expression/);
});

test('every match is found whatever the g flag, empty matches included', () => {
  assert.deepEqual(allMatches(/\d/, 'a1b2').map((m) => [m.index, m.text]), [[1, '1'], [3, '2']]);
  assert.equal(allMatches(/x*/, 'ab').length, 3);
});

test('group names line up with group numbers', () => {
  assert.deepEqual(groupNames('(a)(?:b)(?<year>c)(?=d)(?<!e)[(](\\()(?<m>f)'), [null, 'year', null, 'm']);
});

test('escaped text matches itself literally', () => {
  const text = 'price (USD): $4.99 [a-b] {1} ^x|y/z\\';
  assert.ok(new RegExp(`^${escapeLiteral(text)}$`).test(text));
  assert.ok(new RegExp(`^${escapeLiteral(text)}$`, 'v').test(text));
});

test('the screen shows samples with matches and groups, and mistakes change nothing', () => {
  const bench = new Workbench();
  bench.addSamples(['a1 b22', 'none']);
  bench.setPattern('/(?<letter>[a-z])(\\d+)/');
  const screen = bench.screen();
  assert.equal(
    screen,
    [
      'Pattern: /(?<letter>[a-z])(\\d+)/ (2 groups)',
      'Samples: 1 of 2 match (matches in [[ ]]):',
      '  1. [[a1]] [[b22]]',
      '       letter="a" $2="1" | letter="b" $2="22"',
      '  2. none   (no match)',
    ].join('\n'),
  );
  assert.throws(() => bench.setPattern('(('), UsageError);
  assert.throws(() => bench.drop(3), /numbered 1-2/);
  assert.equal(bench.screen(), screen);
  assert.equal(bench.replace('<$2>'), [
    '/(?<letter>[a-z])(\\d+)/ → "<$2>", replacing the first match (add the g flag for all); the samples are unchanged:',
    '  1. <1> b22',
    '  2. none',
  ].join('\n'));
});

test('the screen never runs the pattern', () => {
  const bench = new Workbench();
  bench.setPattern('a');
  bench.addSamples(['a']);
  bench.regex = { toString: () => '/a/', source: 'a', flags: '', exec: () => assert.fail('ran the regex') };
  assert.match(bench.screen(), /1 of 1 match/);
});

test('commands are split by the rule every implementation shares', () => {
  const file = new URL('../../../wit/command-split-cases.json', import.meta.url);
  const { cases } = JSON.parse(readFileSync(file, 'utf8'));
  assert.ok(cases.length > 20);
  for (const c of cases) {
    const expected = { name: c.name, args: c.arguments, body: c.body ?? undefined };
    assert.deepEqual(splitCommand(c.text), expected, c.why);
  }
});

test('the environment answers usage errors and rethrows bugs', () => {
  const env = makeEnvironment([
    { signature: 'bug', description: 'x', run: () => { throw new TypeError('a bug'); } },
    { signature: 'oops', description: 'x', run: () => { throw new UsageError('try again'); } },
  ]);
  assert.deepEqual(env.handleCommand('oops'), { output: 'try again', success: false });
  assert.throws(() => env.handleCommand('bug'), TypeError);
  assert.equal(env.handleCommand('nope').success, false);
  const described = makeEnvironment().describe();
  assert.deepEqual(described.commands.map((c) => c.signature.split(' ')[0]), ['pattern', 'sample', 'test', 'replace', 'escape', 'drop', 'clear']);
});

/** The interfaces a world of wit/v0.2.1 exports, its `include`s followed,
 * as jco names the module's exports (`screen-changes` -> `screenChanges`). */
function worldExports(wit, world) {
  const block = new RegExp(`^world ${world} \\{([^}]*)\\}`, 'm').exec(wit);
  assert.ok(block, `no world ${world} in the WIT`);
  const names = [];
  for (const [, verb, name] of block[1].matchAll(/^\s*(include|export)\s+([\w-]+)\s*;/gm)) {
    if (verb === 'include') names.push(...worldExports(wit, name));
    else names.push(name.replace(/-([a-z])/g, (_, c) => c.toUpperCase()));
  }
  return names;
}

test('the plugin and its crash fixture export every interface of the world full-plugin', async () => {
  const wit = readFileSync(new URL('../../../wit/v0.2.1/environment.wit', import.meta.url), 'utf8');
  const wanted = worldExports(wit, 'full-plugin');
  assert.ok(wanted.includes('screenChanges'), `${wanted}`);
  const fixture = await import('../../../tests/fixtures/polyglot/javascript/regex_crash.js');
  for (const module of [plugin, fixture]) {
    for (const name of wanted) assert.equal(typeof module[name], 'object', `${name} is not exported`);
  }
  assert.equal(fixture.screenChanges, plugin.screenChanges);
  assert.equal(fixture.state, plugin.state);
  assert.ok(fixture.environment.describe().commands.some((c) => c.signature.startsWith('crash ')));
  // The fixture's commands work on the workbench its `state` keeps.
  const before = plugin.state.snapshot();
  try {
    fixture.environment.handleCommand('sample kept by the fixture');
    assert.deepEqual(JSON.parse(new TextDecoder().decode(plugin.state.snapshot())).samples, ['kept by the fixture']);
  } finally {
    plugin.state.restore(before);
  }
});

test('the screen changes only when the plugin is called; it asks for nothing', () => {
  assert.equal(plugin.screenChanges.screenChanges(), 'when-called');
  assert.equal(plugin.screenChanges.screenChanges(), 'when-called', 'the same answer every time');
  assert.deepEqual(plugin.capabilities.requested(), []);
});

/** A workbench with a pattern (named and unnamed groups, flags) and
 * samples that match and do not, one not ASCII. */
function busyBench() {
  const bench = new Workbench();
  bench.setPattern('/(?<year>\\d{4})-(\\d{2})\\/x/gi');
  bench.addSamples(['in 2024-05/X and 2025-01/x', 'no date', 'été 1999-12/x ✓']);
  return bench;
}

const encode = (value) => new TextEncoder().encode(typeof value === 'string' ? value : JSON.stringify(value));

test('a restored workbench is the same workbench', () => {
  const bench = busyBench();
  const bytes = bench.snapshot();
  assert.ok(bytes instanceof Uint8Array);
  assert.deepEqual(JSON.parse(new TextDecoder().decode(bytes)), {
    version: SNAPSHOT_VERSION,
    pattern: { source: '(?<year>\\d{4})-(\\d{2})\\/x', flags: 'gi' },
    samples: ['in 2024-05/X and 2025-01/x', 'no date', 'été 1999-12/x ✓'],
  });
  const restored = new Workbench();
  restored.restore(bytes);
  assert.equal(restored.screen(), bench.screen());
  assert.match(restored.screen(), /Samples: 2 of 3 match/);
  assert.equal(String(restored.regex), String(bench.regex));
  assert.deepEqual(restored.results, bench.results);
  assert.equal(restored.test('1234-56/X'), bench.test('1234-56/X'));
  // The same commands go on alike, on a workbench of its own.
  assert.equal(restored.addSamples(['0000-00/x']), 'Added sample 4: 1 of 1 match.');
  assert.equal(bench.samples.length, 3);
  // A bare pattern, and no pattern at all, come back too.
  for (const setUp of [(b) => b.setPattern('a/b'), (b) => b.addSamples(['only a sample']), () => {}]) {
    const original = new Workbench();
    setUp(original);
    const copy = new Workbench();
    copy.restore(original.snapshot());
    assert.equal(copy.screen(), original.screen());
    assert.deepEqual(copy.snapshot(), original.snapshot());
  }
  // No bytes is no state: an empty workbench.
  const emptied = busyBench();
  emptied.restore(new Uint8Array());
  assert.equal(emptied.screen(), new Workbench().screen());
});

test('a snapshot the workbench cannot read is refused and changes nothing', () => {
  const good = JSON.parse(new TextDecoder().decode(busyBench().snapshot()));
  const cases = [
    [encode('not json'), /^the snapshot is not the JSON the regex workbench writes \(/],
    [new Uint8Array([0xff, 0x7b]), /^the snapshot is not the JSON the regex workbench writes \(/],
    [encode([1]), /^the snapshot is a list, not the JSON object the regex workbench writes/],
    [encode({ ...good, version: undefined }), /^the snapshot has no format version/],
    [encode({ ...good, version: 2 }), /^the snapshot has format version 2, and this build of the regex workbench reads only version 1;/],
    [encode({ ...good, version: '1' }), /^the snapshot has format version "1"/],
    [encode({ ...good, samples: 'x' }), /^the snapshot's samples are not a list of strings/],
    [encode({ ...good, samples: ['a', 2] }), /^the snapshot's samples are not a list of strings/],
    [encode({ ...good, samples: Array(MAX_SAMPLES + 1).fill('a') }), /^the snapshot holds 201 samples, more than the 200/],
    [encode({ ...good, pattern: '\\d' }), /^the snapshot's pattern is a string, not an object with a source and flags/],
    [encode({ ...good, pattern: { source: 'a' } }), /^the snapshot's pattern has no source and flags as strings/],
    [encode({ ...good, pattern: { source: 'a', flags: 'G' } }), /^the snapshot's pattern has the flags "G"/],
    [encode({ ...good, pattern: { source: 'a', flags: 'q' } }), /^the snapshot's pattern \/a\/q cannot be set again: Unknown flag q/],
    [encode({ ...good, pattern: { source: '(', flags: '' } }), /^the snapshot's pattern \/\(\/ cannot be set again: That pattern does not compile: /],
  ];
  for (const [bytes, why] of cases) {
    const bench = busyBench();
    const screen = bench.screen();
    assert.throws(() => bench.restore(bytes), (error) => {
      assert.ok(error instanceof SnapshotError, `${error}`);
      assert.match(error.message, why);
      assert.ok(error.message.endsWith('; `pattern` and `sample` set the workbench up again'), error.message);
      assert.ok(!error.message.includes('\n'), error.message);
      return true;
    });
    assert.equal(bench.screen(), screen, 'a refused snapshot changes nothing');
  }
});

test('the state export keeps the workbench its environment answers over', () => {
  const bench = new Workbench();
  const env = makeEnvironment(undefined, bench);
  const state = makeState(bench);
  env.handleCommand('pattern \\d+');
  env.handleCommand('sample a 1\nb');
  const bytes = state.snapshot();
  assert.ok(bytes instanceof Uint8Array);

  // A fresh instance: a new workbench, restored.
  const fresh = new Workbench();
  const freshEnv = makeEnvironment(undefined, fresh);
  assert.equal(makeState(fresh).restore(bytes), undefined);
  assert.deepEqual(freshEnv.getScreen(), env.getScreen());
  assert.deepEqual(freshEnv.handleCommand('test 42'), env.handleCommand('test 42'));

  // A refusal is a thrown string: the `err` of restore's result.
  assert.throws(
    () => makeState(new Workbench()).restore(encode('{')),
    (thrown) => typeof thrown === 'string' && thrown.startsWith('the snapshot is not the JSON the regex workbench writes'),
  );
});

test('the screen is drawn from the workbench alone: between commands it does not change', async () => {
  const env = makeEnvironment();
  env.handleCommand('pattern /(?<n>\\d+)/g');
  env.handleCommand('sample a 1 b 22\nno digits');
  const first = env.getScreen();
  assert.match(first.content, /Samples: 1 of 2 match/);
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.deepEqual(env.getScreen(), first);
  // Another workbench with the same commands draws the same section.
  const twin = makeEnvironment();
  twin.handleCommand('pattern /(?<n>\\d+)/g');
  twin.handleCommand('sample a 1 b 22\nno digits');
  assert.deepEqual(twin.getScreen(), first);
  // Only a command changes it.
  env.handleCommand('drop 2');
  assert.notDeepEqual(env.getScreen(), first);
});

test('the snapshot is kept while commands only read, and made anew after every change', () => {
  const bench = busyBench();
  const first = bench.snapshot();
  bench.test('2024-05/x');
  bench.replace('[$1]');
  bench.screen();
  assert.equal(bench.snapshot(), first);
  const changes = [
    (b) => b.addSamples(['2026-11/x']),
    (b) => b.setPattern('/\\d+/g'),
    (b) => b.drop(1),
    (b) => b.clear(),
  ];
  for (const change of changes) {
    const before = bench.snapshot();
    change(bench);
    const after = bench.snapshot();
    assert.notDeepEqual(after, before);
    const copy = new Workbench();
    copy.restore(after);
    assert.deepEqual(copy.snapshot(), after);
    assert.equal(copy.screen(), bench.screen());
  }
});
