// Type declarations for envhost-plugin.js (the JavaScript SDK for envhost
// plugins). Kept beside the module by hand; test/declarations.test.js
// checks that every export of the module is declared here and that nothing
// is declared that the module does not export.

/** The screen's line limit when a plugin gives none. */
export const DEFAULT_MAX_LINES: 50;

/** A failed command: its message is the failed response's output, and the
 * state stays as it is. Throw it, or call `fail(message)`. */
export class Fail extends Error {}

/** A mistake in the plugin's own code, found by the SDK. */
export class PluginError extends Error {}

/** Ends the command as failed with `message` (say what went wrong and how
 * to recover). */
export function fail(message: string): never;

/** A command split by the one rule every implementation shares
 * (`wit/command-split-cases.json`). */
export interface SplitCommand {
  /** The first line up to its first whitespace character. */
  name: string;
  /** The rest of the first line, without leading or trailing whitespace. */
  args: string;
  /** Everything after the first line feed, verbatim; undefined without one. */
  body: string | undefined;
}

/** A command's `name`, its `args` and its `body`. */
export function splitCommand(text: string): SplitCommand;

/** What a command's `run(call, self)` gets as `call`. */
export class Call implements SplitCommand {
  constructor(text: string);
  name: string;
  args: string;
  body: string | undefined;
  /** The command as the agent sent it. */
  text: string;
  /** The arguments split on whitespace. */
  words(): string[];
  /** The `index`-th argument word, or undefined. */
  arg(index: number): string | undefined;
  /** The arguments after the first `count` words (default 1). */
  rest(count?: number): string;
}

/** The power a request asks for, as the WIT variant `power`. */
export type Power =
  | { tag: 'read-directory'; val: string }
  | { tag: 'write-directory'; val: string }
  | { tag: 'variable'; val: string }
  | { tag: 'program'; val: string }
  | { tag: 'memory'; val: bigint }
  | { tag: 'network'; val: string };

/** A power the plugin asks the operator for, with the reason shown to the
 * operator (asking grants nothing). */
export interface Request {
  power: Power;
  reason: string;
}

/** Builders of requests. */
export const request: {
  /** Read a directory of the project (seen at `/` + its path). */
  readDirectory(path: string, reason: string): Request;
  /** Read and write a directory of the project. */
  writeDirectory(path: string, reason: string): Request;
  /** See one of the host's environment variables. */
  variable(name: string, reason: string): Request;
  /** Run a program interactively. */
  program(program: string, reason: string): Request;
  /** Use up to `bytes` of memory. */
  memory(bytes: number | bigint, reason: string): Request;
  /** Send HTTP requests to destinations matching `pattern`, as the operator
   * writes it in `allowed-hosts` (`https://api.github.com`). */
  network(pattern: string, reason: string): Request;
};

/** The plugin's name and requests, set by `definePlugin`, for the file
 * helpers' sentences. */
export const current: { name: string; requests: Request[] };

/** A command's answer: a string is a successful output. */
export interface Response {
  output: string;
  success: boolean;
}

/** What `screen(self)` may return besides a string. */
export interface Screen {
  content: string;
  maxLines?: number;
}

/** When the plugin's screen section can change: the WIT enum `when` of the
 * interface `screen-changes` (`wit/v0.2.1`). `'when-called'` promises that
 * `screen(self)` draws only from what the plugin's own calls leave, so the
 * host redraws it only after calling the plugin; `'any-time'` (the
 * default) is for a screen showing the time, files, a program's progress. */
export type ScreenChanges = 'any-time' | 'when-called';

/** What every command, `screen` and the hooks get as `self`. */
export interface Self<State> {
  /** JSON values, snapshotted after every command and given back to a
   * fresh instance after a trap or a host restart with `--resume`. */
  state: State;
}

/** One command of the definition. */
export interface CommandDefinition<State> {
  /** How to call it, e.g. `put <key> <value>`; its first word is its name. */
  signature: string;
  /** The long help, shown until the agent first uses the command. */
  description: string;
  /** The short help, shown after. */
  summary?: string;
  /** An example call. */
  example?: string;
  /** Whether the command is simple enough to need no long help. */
  simple?: boolean;
  /** Runs the command: return the output, `{ output, success }`, or call
   * `fail(message)`; may be async. */
  run(call: Call, self: Self<State>): string | Response | Promise<string | Response>;
}

/** What `definePlugin` takes. */
export interface PluginDefinition<State = unknown> {
  /** The .wasm file's stem, used in the sentences naming a grant. */
  name?: string;
  /** One line saying what the environment is for. */
  summary: string;
  commands: CommandDefinition<State>[];
  requests?: Request[];
  /** The initial state (JSON values). */
  state?: State;
  screen?(self: Self<State>): string | Screen;
  maxLines?: number;
  /** When the screen can change: `'when-called'` if `screen(self)` shows
   * only what the plugin's own calls leave; `'any-time'` (the default)
   * otherwise. Anything else throws a `PluginError`. */
  screenChanges?: ScreenChanges;
  snapshot?(self: Self<State>): Uint8Array;
  restore?(self: Self<State>, bytes: Uint8Array): void;
  shutdown?(self: Self<State>): void;
}

/** The record `command-info` of the WIT contract. */
export interface CommandInfo {
  signature: string;
  description: string;
  summary: string | undefined;
  example: string;
  simple: boolean;
}

/** The exports of the world `full-plugin`, for the component. */
export interface PluginExports {
  environment: {
    describe(): { summary: string; commands: CommandInfo[] };
    handleCommand(text: string): Response | Promise<Response>;
    getScreen(): { content: string; maxLines: number };
    shutdown(): void;
  };
  capabilities: {
    requested(): Request[];
  };
  state: {
    snapshot(): Uint8Array;
    restore(bytes: Uint8Array): void;
  };
  /** The interface `screen-changes` (new in 0.2.1): export it too. */
  screenChanges: {
    screenChanges(): ScreenChanges;
  };
}

/** Checks a plugin's definition and returns the objects the component
 * exports (`export const { environment, capabilities, state, screenChanges }
 * = definePlugin({...})`). A mistake in the definition throws a `PluginError`, at build
 * time. */
export function definePlugin<State = unknown>(definition: PluginDefinition<State>): PluginExports;

/** The sentence for a file access the sandbox refused: which directory to
 * ask the operator for, and how; undefined when the error is the file's
 * own. */
export function grantHint(directory: string, options: { writing: boolean; granted: boolean }): string | undefined;

/** The project directory `path` lies in: the longest requested directory
 * that holds it, else its first component. */
export function directoryOf(path: string): string;

/** `text` without its trailing whitespace (Unicode's White_Space). */
export function trimEnd(text: string): string;

/** The largest body `httpGet` keeps unless told otherwise (1 MiB). */
export const DEFAULT_MAX_BODY: number;

/** The host's bound on a plugin's requests in flight. */
export const MAX_REQUESTS_IN_FLIGHT: 8;

/** `scheme://host[:port]` of an `http(s)` URL as `allowed-hosts` writes it;
 * throws `Fail` for anything else. */
export function originOf(url: string): string;

/** The `Fail` to throw for an error `fetch(url)` rejected with. */
export function fetchError(url: string, error: unknown): Fail;

/** The answer of `httpGet`: any status is an answer. */
export interface HttpResponse {
  status: number;
  headers: Headers;
  body: Uint8Array;
  /** The body decoded as UTF-8, invalid bytes replaced. */
  text(): string;
}

/** `GET url` through the host, the whole body read; throws `Fail` with a
 * sentence for the agent when there is no answer. */
export function httpGet(url: string, options?: { maxBytes?: number; headers?: HeadersInit }): Promise<HttpResponse>;
