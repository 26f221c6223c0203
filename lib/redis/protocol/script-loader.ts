import { readFileSync } from 'node:fs';
import * as path from 'node:path';

/**
 * The folder of the lock scripts: `lua/` beside this file, in `lib/` (sources, tests) as in
 * `dist/` (the build copies it there).
 */
export const LUA_DIR = path.join(__dirname, 'lua');

/** `--- @include "includes/name"`, alone on its line (the path is relative to `LUA_DIR`). */
const INCLUDE = /^---[ \t]*@include[ \t]+"([^"]+)"[ \t]*$/gm;
/** `$NAME`: a constant of the TypeScript side, put in when the script is loaded. */
const CONSTANT = /\$([A-Z][A-Z0-9_]*)/g;

/** Values the scripts take from the TypeScript side (channel names, windows in ms...). */
export type LuaConstants = Readonly<Record<string, string | number>>;

/**
 * A script that cannot be loaded: a missing or unreadable file, an include that includes itself
 * (directly or not), or a `$NAME` no constant is given for. The package is broken: this is
 * thrown when the module loads, never on a lock call.
 * @internal
 */
export class ScriptLoadError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ScriptLoadError';
  }
}

/**
 * Reads the script `name` (`<dir>/<name>.lua`) with its includes put in place: each include's
 * own includes first, each file once per script (the first `@include` of a file puts it there,
 * later ones put nothing), then every `$NAME` replaced by its constant.
 * @throws ScriptLoadError (see there)
 * @internal
 */
export function loadScript(name: string, constants: LuaConstants, dir = LUA_DIR): string {
  const lua = expand(`${name}.lua`, dir, new Set(), []);
  return lua.replace(CONSTANT, (_, key: string) => {
    const value = constants[key];
    if (value === undefined) {
      throw new ScriptLoadError(`${name}.lua uses $${key}, which no constant defines`);
    }
    return String(value);
  });
}

/** The text of `file` with its includes expanded; `done` holds the files already put in. */
function expand(file: string, dir: string, done: Set<string>, stack: string[]): string {
  let text: string;
  try {
    text = readFileSync(path.join(dir, file), 'utf8');
  } catch (e) {
    const where = stack.length ? ` (included by ${stack[stack.length - 1]})` : '';
    throw new ScriptLoadError(`cannot read ${path.join(dir, file)}${where}: ${String(e)}`);
  }
  done.add(file);
  const inner = [...stack, file];
  return text.replace(INCLUDE, (_, include: string) => {
    const child = `${include}.lua`;
    if (inner.includes(child)) {
      throw new ScriptLoadError(`include cycle: ${[...inner, child].join(' -> ')}`);
    }
    return done.has(child) ? '' : expand(child, dir, done, inner).trimEnd();
  });
}
