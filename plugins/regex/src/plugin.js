// The `regex` environment: a workbench for building a regular expression
// against sample texts, as an envhost plugin written in JavaScript
// (componentize-js).
//
// The agent sets a pattern and adds samples; its screen section shows every
// sample with the matches marked and their groups, so a pattern can be
// tightened one command at a time. `test` tries one text, `replace` previews
// a substitution. The commands are described to the host (`describe`),
// which routes them by first word and renders their help: LONG until a
// command is used, SHORT after.
//
// This module is the WIT adapter: it parses command text, calls the
// workbench and returns the WIT records (plain objects, camelCase fields).
// A UsageError becomes a failed response and changes nothing; any other
// exception is a bug and is deliberately not caught: the call traps, the
// host reports the exception and starts a fresh instance.
//
// It is written against the WIT directly (it predates the SDK) and builds
// the world `full-plugin` of wit/v0.2.1: besides `environment` it exports
// `capabilities` (it asks for nothing), `state` (it keeps the workbench:
// the pattern and the samples as JSON, `Workbench.snapshot` in
// workbench.js, which the host takes after every command that returned and
// puts back into a fresh instance after a trap and when it resumes a saved
// session, so a crash costs at most the command that crashed) and
// `screen-changes`, which
// answers `when-called`: the screen is drawn from the workbench alone (the
// pattern, the samples and the matches the commands computed), never from
// the time, files or anything else, so it changes only during this
// plugin's own commands and the host need not ask for it after commands
// to other environments.

import { SnapshotError, UsageError, Workbench, escapeLiteral } from './workbench.js';

const SUMMARY = 'A regular-expression workbench: a pattern, sample texts, and their matches on screen';

// The workbench's own lines; the host adds the commands' help below them.
const SCREEN_LINES = 45;

function sampleNumber(args, command) {
  const word = args.trim();
  if (!/^#?\d+$/.test(word)) {
    throw new UsageError(`${command} needs a sample number, e.g. \`${command} 2\`; the screen numbers the samples.`);
  }
  return Number(word.replace('#', ''));
}

/** The first line's text and the body's lines as one text; CRLF line ends
 * in the body count as LF. */
function withBody(first, body) {
  return body === undefined ? first : `${first}\n${body.replace(/\r\n/g, '\n')}`;
}

/** The commands, in the order the help lists them. */
export const COMMANDS = [
  {
    signature: 'pattern <regex>',
    description:
      'Set the pattern, as /source/flags or as a bare source (JavaScript syntax; flags d g i m s u v y).\n' +
      'Every sample is tried again at once; the screen shows what matches.',
    summary: 'Set the pattern (/source/flags or a bare source)',
    example: 'pattern /(?<year>\\d{4})-(\\d{2})-(\\d{2})/g',
    run: (bench, args) => bench.setPattern(args),
  },
  {
    signature: 'sample <text>',
    description:
      'Add a text to try the pattern on; each further line adds one more sample.\n' +
      'Add texts that must match and texts that must not.',
    summary: 'Add a sample text; each further line adds another',
    example: 'sample released 2024-05-01, patched 2024-06-12\nno date in this one',
    run: (bench, args, body) => bench.addSamples(withBody(args, body).split('\n')),
  },
  {
    signature: 'test <text>',
    description:
      'Try the pattern on one text without keeping it: every match with its position and groups.\n' +
      'Lines after the first are part of the text (for the m and s flags).',
    summary: 'Try the pattern on one text, without keeping it',
    example: 'test due 2025-01-31',
    run: (bench, args, body) => bench.test(withBody(args, body)),
  },
  {
    signature: 'replace <replacement>',
    description:
      "Preview a substitution on every sample, as JavaScript's String.replace does it\n" +
      '($1, $<name>, $& work; without the g flag only the first match is replaced). The samples stay as they are.',
    summary: 'Preview a substitution on every sample',
    example: 'replace $3/$2/$<year>',
    run: (bench, args) => bench.replace(args),
  },
  {
    signature: 'escape <text>',
    description: 'Show the text as a pattern that matches it literally.',
    example: 'escape price (USD): $4.99',
    simple: true,
    run: (bench, args, body) => escapeLiteral(withBody(args, body)),
  },
  {
    signature: 'drop <n>',
    description: 'Remove sample n.',
    simple: true,
    run: (bench, args) => bench.drop(sampleNumber(args, 'drop')),
  },
  {
    signature: 'clear',
    description: 'Remove every sample (the pattern is kept).',
    simple: true,
    run: (bench) => bench.clear(),
  },
];

/** Unicode's White_Space set, spelled out: JavaScript's `\s` also matches
 * U+FEFF and misses U+0085, and the rule must read alike everywhere. */
const WHITESPACE = '\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
const LEADING = new RegExp(`^[${WHITESPACE}]+`);
const TRAILING = new RegExp(`[${WHITESPACE}]+$`);
const ANY = new RegExp(`[${WHITESPACE}]`);

/**
 * A command's `name`, its `args` and its `body`: the one rule the host and
 * every plugin follow (`wit/command-split-cases.json` holds the rule and
 * the cases every implementation is tested against). Leading whitespace,
 * blank lines included, is skipped; the name is the first line up to its
 * first whitespace character; the arguments are the rest of that line
 * without leading or trailing whitespace; the body is everything after the
 * first newline, verbatim (`undefined` without one).
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

/**
 * The object the component exports as `envhost:environment/environment`,
 * answering with `commands` over `bench`. One workbench lives as long as
 * the component instance (`bench` below); after a trap the host starts a
 * fresh instance, and `state.restore` puts the last snapshot back into it.
 */
export function makeEnvironment(commands = COMMANDS, bench = new Workbench()) {
  const byName = new Map(commands.map((c) => [c.signature.split(' ')[0], c]));
  return {
    describe() {
      return {
        summary: SUMMARY,
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
      const { name, args, body } = splitCommand(text);
      const command = byName.get(name);
      // The host sends only described commands; answer anything else
      // rather than trap on it.
      if (!command) {
        return { output: `Unknown command: ${name}\nAvailable: ${[...byName.keys()].join(', ')}`, success: false };
      }
      try {
        return { output: command.run(bench, args, body), success: true };
      } catch (error) {
        if (error instanceof UsageError) {
          return { output: error.message, success: false };
        }
        throw error;
      }
    },

    getScreen() {
      return { content: bench.screen(), maxLines: SCREEN_LINES };
    },

    shutdown() {},
  };
}

/** The component instance's workbench: the one `environment` answers
 * over and `state` keeps (the crash fixture answers over it too). */
export const bench = new Workbench();

export const environment = makeEnvironment(COMMANDS, bench);

/** `envhost:environment/capabilities`: the workbench needs no grant. */
export const capabilities = {
  requested() {
    return [];
  },
};

/** The object the component exports as `envhost:environment/state`,
 * keeping `workbench`: the host asks for `snapshot` after every command
 * that returned and hands it to `restore` on a fresh instance (after a
 * trap, or when it resumes a saved session). */
export function makeState(workbench) {
  return {
    snapshot() {
      return workbench.snapshot();
    },
    restore(bytes) {
      try {
        workbench.restore(bytes);
      } catch (error) {
        // A thrown string is the `err` of restore's result; the workbench
        // is left as it was (empty, on a fresh instance).
        if (error instanceof SnapshotError) throw error.message;
        throw error;
      }
    },
  };
}

export const state = makeState(bench);

/** When the screen can change: the WIT enum `when` of `screen-changes`.
 * Only during this plugin's calls: `Workbench.screen()` reads nothing but
 * the workbench, which only commands change. */
const SCREEN_CHANGES = 'when-called';

/** `envhost:environment/screen-changes` (wit/v0.2.1). */
export const screenChanges = {
  screenChanges() {
    return SCREEN_CHANGES;
  },
};
