// Type declarations for envhost-files.js (files in the directories the
// operator granted). test/declarations.test.js checks that they match the
// module's exports. Paths are relative to the project; a refused access
// throws `Fail` with the sentence naming the grant to ask for.

/** Whether a granted directory holds `path` (a project path). */
export function isGranted(path: string): boolean;

/** The text of a file, as UTF-8. */
export function readText(path: string): string;

/** Writes `text` to a file (UTF-8), replacing what it held. */
export function writeText(path: string, text: string): void;

/** The names in a directory, sorted. */
export function listNames(path: string): string[];
