// Unit tests of the regex workbench and the command parsing, on the
// machine's own node: `node --test plugins/regex/test/` (scripts/test runs
// them). The component itself is tested through the host in
// tests/e2e/polyglot.rs.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { makeEnvironment, splitCommand } from '../src/plugin.js';
import { UsageError, Workbench, allMatches, escapeLiteral, groupNames, parsePattern } from '../src/workbench.js';

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
