// The regex workbench itself: one pattern, the sample texts it is tried on,
// and the text the agent sees. Plain JavaScript with no WebAssembly in
// sight, so it is tested with the machine's own node (`node --test` in
// plugins/regex).
//
// This module owns the workbench's rules and wording; it must not know about
// the host, the WIT interface or how commands are parsed (`plugin.js` does
// that). Matching is done when the pattern or the samples change, never
// while drawing the screen: a pattern that backtracks for ever then runs
// into the command's time limit, not the screen's.

/** A request the workbench cannot carry out; the message says why and what
 * to do instead, and nothing was changed. */
export class UsageError extends Error {}

/** Bytes `Workbench.restore` cannot read back into a workbench; the message
 * is one clause saying why and what to do (no full stop: the host quotes it
 * inside its own sentence), and the workbench is unchanged. */
export class SnapshotError extends Error {}

// The snapshot's format: JSON (UTF-8) of
//   {"version":1,"pattern":{"source":"\\d+","flags":"g"},"samples":["a 1","b"]}
// with `pattern` null when none is set. The matches are not kept: they
// are computed again from the pattern and the samples. A change an older
// build could not read gets a new version; `restore` refuses versions it
// does not know rather than guess.
export const SNAPSHOT_VERSION = 1;

// The screen is read after every command: keep it short.
const SAMPLES_SHOWN = 20;
const MATCHES_SHOWN = 10;
const TEXT_WIDTH = 160;
export const MAX_SAMPLES = 200;

const FLAGS = 'dgimsuvy';

/**
 * Reads `/source/flags` or a bare source into a RegExp. Throws UsageError
 * with the engine's own words when the pattern does not compile.
 */
export function parsePattern(text) {
  const trimmed = text.trim();
  if (!trimmed) {
    throw new UsageError('pattern needs a regular expression, e.g. `pattern /\\d+/g` or `pattern \\d+`.');
  }
  let source = trimmed;
  let flags = '';
  const slashed = /^\/(.*)\/([a-z]*)$/s.exec(trimmed);
  if (slashed) {
    [, source, flags] = slashed;
    const unknown = [...flags].filter((f) => !FLAGS.includes(f));
    if (unknown.length > 0) {
      throw new UsageError(
        `Unknown flag${unknown.length > 1 ? 's' : ''} ${unknown.join('')}: JavaScript knows ${FLAGS.split('').join(' ')}.`,
      );
    }
  }
  try {
    return new RegExp(source, flags);
  } catch (error) {
    throw new UsageError(`That pattern does not compile: ${error.message}. The pattern is unchanged.`);
  }
}

/** Every match of `regex` in `text`, whatever its `g` flag says. */
export function allMatches(regex, text) {
  const flags = regex.flags.includes('g') ? regex.flags : `${regex.flags}g`;
  const global = new RegExp(regex.source, flags);
  return [...text.matchAll(global)].map((m) => ({
    index: m.index,
    text: m[0],
    groups: m.slice(1),
  }));
}

/** A regex source that matches `text` literally, with or without the u
 * and v flags (which refuse escapes of characters that need none). */
export function escapeLiteral(text) {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}

function quote(text) {
  return JSON.stringify(text);
}

function cut(text, width = TEXT_WIDTH) {
  return text.length <= width ? text : `${text.slice(0, width - 3)}...`;
}

/**
 * The name of each capturing group of `source` in order, `null` for an
 * unnamed one: `(\d+)-(?<month>\d+)` gives `[null, 'month']`.
 */
export function groupNames(source) {
  const names = [];
  let inClass = false;
  for (let i = 0; i < source.length; i += 1) {
    const c = source[i];
    if (c === '\\') {
      i += 1;
    } else if (inClass) {
      if (c === ']') inClass = false;
    } else if (c === '[') {
      inClass = true;
    } else if (c === '(') {
      if (source[i + 1] !== '?') {
        names.push(null);
      } else if (source[i + 2] === '<' && source[i + 3] !== '=' && source[i + 3] !== '!') {
        const end = source.indexOf('>', i + 3);
        names.push(source.slice(i + 3, end));
      }
    }
  }
  return names;
}

/** `$1="2024" month="05"`: each group of a match, by name when it has one. */
function describeGroups(match, names) {
  return match.groups
    .map((value, i) => `${names[i] ?? `$${i + 1}`}=${value === undefined ? 'unset' : quote(value)}`)
    .join(' ');
}

/** The text with every match marked as [[match]]. */
function marked(text, matches) {
  let out = '';
  let at = 0;
  for (const match of matches) {
    out += `${text.slice(at, match.index)}[[${match.text}]]`;
    at = match.index + match.text.length;
  }
  return out + text.slice(at);
}

function jsonKind(value) {
  if (value === undefined || value === null) return 'missing';
  if (Array.isArray(value)) return 'a list';
  return { string: 'a string', number: 'a number', boolean: 'a boolean', object: 'an object' }[typeof value] ?? typeof value;
}

/** The pattern (a RegExp or null) and the samples of a snapshot, or a
 * SnapshotError saying what is wrong with it. */
function readSnapshot(bytes) {
  let value;
  try {
    value = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch (error) {
    throw new SnapshotError(`the snapshot is not the JSON the regex workbench writes (${error.message})`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new SnapshotError(`the snapshot is ${jsonKind(value)}, not the JSON object the regex workbench writes`);
  }
  if (!('version' in value)) {
    throw new SnapshotError('the snapshot has no format version, so it is not one the regex workbench wrote');
  }
  if (value.version !== SNAPSHOT_VERSION) {
    throw new SnapshotError(
      `the snapshot has format version ${JSON.stringify(value.version)}, and this build of the regex workbench reads only version ${SNAPSHOT_VERSION}`,
    );
  }
  const { pattern, samples } = value;
  if (!Array.isArray(samples) || !samples.every((sample) => typeof sample === 'string')) {
    throw new SnapshotError("the snapshot's samples are not a list of strings");
  }
  if (samples.length > MAX_SAMPLES) {
    throw new SnapshotError(`the snapshot holds ${samples.length} samples, more than the ${MAX_SAMPLES} the workbench holds`);
  }
  if (pattern === null) return { regex: null, samples };
  if (typeof pattern !== 'object' || Array.isArray(pattern)) {
    throw new SnapshotError(`the snapshot's pattern is ${jsonKind(pattern)}, not an object with a source and flags`);
  }
  if (typeof pattern.source !== 'string' || typeof pattern.flags !== 'string') {
    throw new SnapshotError("the snapshot's pattern has no source and flags as strings");
  }
  if (!/^[a-z]*$/.test(pattern.flags)) {
    throw new SnapshotError(`the snapshot's pattern has the flags ${JSON.stringify(pattern.flags)}, which are not flags of a pattern`);
  }
  const shown = `/${pattern.source}/${pattern.flags}`;
  try {
    return { regex: parsePattern(shown), samples };
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    throw new SnapshotError(`the snapshot's pattern ${shown} cannot be set again: ${error.message.replace(/\.$/, '')}`);
  }
}

export class Workbench {
  constructor() {
    this.regex = null;
    this.samples = [];
    // Matches per sample for the current pattern, computed by commands so
    // that drawing the screen never runs the regex.
    this.results = [];
    // The last snapshot's bytes, until the pattern or the samples change
    // (`recompute`, which every such change goes through): the host asks
    // after every command, and `test`, `replace` and `escape` only read.
    this.snapshotBytes = null;
  }

  /** The workbench as bytes (UTF-8 JSON): the pattern and the samples,
   * all the screen is drawn from. */
  snapshot() {
    if (this.snapshotBytes === null) {
      const pattern = this.regex ? { source: this.regex.source, flags: this.regex.flags } : null;
      this.snapshotBytes = new TextEncoder().encode(JSON.stringify({ version: SNAPSHOT_VERSION, pattern, samples: this.samples }));
    }
    return this.snapshotBytes;
  }

  /** Puts back the workbench `snapshot` gave `bytes` for, the pattern read
   * by the same code as the `pattern` command. Throws SnapshotError, and
   * changes nothing, when the bytes are not a snapshot it can read. Empty
   * bytes (no state) are an empty workbench. */
  restore(bytes) {
    let regex = null;
    let samples = [];
    if (bytes.length > 0) {
      try {
        ({ regex, samples } = readSnapshot(bytes));
      } catch (error) {
        if (error instanceof SnapshotError) {
          throw new SnapshotError(`${error.message}; \`pattern\` and \`sample\` set the workbench up again`);
        }
        throw error;
      }
    }
    this.regex = regex;
    this.samples = samples;
    this.recompute();
  }

  setPattern(text) {
    this.regex = parsePattern(text);
    this.recompute();
    const groups = this.groupCount();
    const matching = this.results.filter((m) => m.length > 0).length;
    let answer = `Pattern set: ${this.regex} (${groups} group${groups === 1 ? '' : 's'})`;
    if (this.samples.length > 0) {
      answer += `\n${matching} of ${this.samples.length} sample${this.samples.length === 1 ? '' : 's'} match.`;
    } else {
      answer += '\nNo samples yet: `sample` adds texts to try it on.';
    }
    return answer;
  }

  addSamples(lines) {
    const texts = lines.filter((line) => line.trim() !== '');
    if (texts.length === 0) {
      throw new UsageError('sample needs a text, e.g. `sample order 66-123 shipped`; each further line adds one more sample.');
    }
    if (this.samples.length + texts.length > MAX_SAMPLES) {
      throw new UsageError(
        `The workbench holds at most ${MAX_SAMPLES} samples and has ${this.samples.length}; \`drop <n>\` or \`clear\` makes room.`,
      );
    }
    const first = this.samples.length + 1;
    this.samples.push(...texts);
    this.recompute();
    const numbers = texts.length === 1 ? `sample ${first}` : `samples ${first}-${first + texts.length - 1}`;
    if (!this.regex) {
      return `Added ${numbers}. No pattern yet: \`pattern\` sets one.`;
    }
    const matching = this.results.slice(first - 1).filter((m) => m.length > 0).length;
    return `Added ${numbers}: ${matching} of ${texts.length} match.`;
  }

  test(text) {
    if (text === '') {
      throw new UsageError('test needs a text to try the pattern on, e.g. `test due 2025-01-31`.');
    }
    const regex = this.requirePattern('test');
    const matches = allMatches(regex, text);
    if (matches.length === 0) {
      return `No match for ${regex} in ${quote(cut(text))}.`;
    }
    const lines = [`${matches.length} match${matches.length === 1 ? '' : 'es'} for ${regex}:`];
    const names = groupNames(regex.source);
    matches.forEach((match, i) => {
      const groups = describeGroups(match, names);
      const end = match.index + match.text.length;
      lines.push(`  ${i + 1}. ${quote(match.text)} at ${match.index}-${end}${groups ? `, ${groups}` : ''}`);
    });
    return lines.join('\n');
  }

  replace(replacement) {
    const regex = this.requirePattern('replace');
    if (this.samples.length === 0) {
      throw new UsageError('There are no samples to replace in: `sample` adds some (or `test` tries one text).');
    }
    const how = regex.flags.includes('g') ? 'every match' : 'the first match (add the g flag for all)';
    const lines = [`${regex} → ${quote(replacement)}, replacing ${how}; the samples are unchanged:`];
    this.samples.forEach((sample, i) => {
      lines.push(`  ${i + 1}. ${sample.replace(new RegExp(regex.source, regex.flags), replacement)}`);
    });
    return lines.join('\n');
  }

  drop(number) {
    if (!(number >= 1 && number <= this.samples.length)) {
      throw new UsageError(
        this.samples.length === 0
          ? 'There are no samples to drop.'
          : `There is no sample ${number}: the samples are numbered 1-${this.samples.length}.`,
      );
    }
    const [gone] = this.samples.splice(number - 1, 1);
    this.recompute();
    return `Dropped sample ${number}: ${quote(cut(gone))}. The later samples moved up by one.`;
  }

  clear() {
    if (this.samples.length === 0) {
      throw new UsageError('There are no samples to clear.');
    }
    const count = this.samples.length;
    this.samples = [];
    this.recompute();
    return `Cleared ${count} sample${count === 1 ? '' : 's'}; the pattern is kept.`;
  }

  requirePattern(command) {
    if (!this.regex) {
      throw new UsageError(`${command} needs a pattern first: \`pattern /\\d+/g\` sets one.`);
    }
    return this.regex;
  }

  groupCount() {
    if (!this.regex) return 0;
    // One empty alternative always matches, and its result holds one slot
    // per capturing group.
    return new RegExp(`${this.regex.source}|`, this.regex.flags.replace(/[gy]/g, '')).exec('').length - 1;
  }

  /** After the pattern or the samples changed: the matches again, and the
   * kept snapshot goes. */
  recompute() {
    this.results = this.regex ? this.samples.map((sample) => allMatches(this.regex, sample)) : [];
    this.snapshotBytes = null;
  }

  screen() {
    const lines = [];
    if (this.regex) {
      const groups = this.groupCount();
      lines.push(`Pattern: ${this.regex} (${groups} group${groups === 1 ? '' : 's'})`);
    } else {
      lines.push('Pattern: none yet (`pattern` sets one)');
    }
    if (this.samples.length === 0) {
      lines.push('Samples: none yet (`sample` adds texts to try the pattern on)');
      return lines.join('\n');
    }
    if (!this.regex) {
      lines.push(`Samples (${this.samples.length}):`);
      this.samples.slice(0, SAMPLES_SHOWN).forEach((sample, i) => lines.push(`  ${i + 1}. ${cut(sample)}`));
    } else {
      const names = groupNames(this.regex.source);
      const matching = this.results.filter((m) => m.length > 0).length;
      lines.push(`Samples: ${matching} of ${this.samples.length} match (matches in [[ ]]):`);
      this.samples.slice(0, SAMPLES_SHOWN).forEach((sample, i) => {
        const matches = this.results[i] ?? [];
        if (matches.length === 0) {
          lines.push(`  ${i + 1}. ${cut(sample)}   (no match)`);
          return;
        }
        lines.push(`  ${i + 1}. ${cut(marked(sample, matches))}`);
        const withGroups = matches.map((m) => describeGroups(m, names)).filter((g) => g !== '');
        if (withGroups.length > 0) {
          const shown = withGroups.slice(0, MATCHES_SHOWN).join(' | ');
          const more = withGroups.length > MATCHES_SHOWN ? ` | ... ${withGroups.length - MATCHES_SHOWN} more` : '';
          lines.push(`       ${cut(shown + more)}`);
        }
      });
    }
    if (this.samples.length > SAMPLES_SHOWN) {
      lines.push(`  ... and ${this.samples.length - SAMPLES_SHOWN} more samples (\`drop <n>\` or \`clear\` to trim)`);
    }
    return lines.join('\n');
  }
}
