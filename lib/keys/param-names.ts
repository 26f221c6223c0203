import { SourceScanner } from './source-scanner';

/** A function's parameters as its source declares them. */
export interface ParamNames {
  /** In order; `undefined` for a destructured parameter. */
  readonly names: (string | undefined)[];
  /** Whether the last parameter is a rest parameter. */
  readonly rest: boolean;
}

/**
 * Reads parameter names from a function's source, because JavaScript keeps no other record of
 * them and `@Locked('product:{id}')` is only worth having if `{id}` means the parameter `id`.
 * Runs at decoration time only. Understands plain, async and generator functions, methods
 * (including computed and quoted names), arrow functions, comments, and default values containing
 * parentheses, braces, strings, template literals and regular expressions, which covers what
 * `tsc` emits for decorated class methods.
 *
 * A destructured parameter has no name (`undefined`); a rest parameter is last and sets `rest`.
 * A function whose source cannot be read (native, bound, or a Proxy installed by another
 * decorator) reports a single unnamed rest parameter: names unknown, every index allowed.
 */
export function getParamNames(fn: (...args: never[]) => unknown): ParamNames {
  const src = Function.prototype.toString.call(fn);
  if (/\{\s*\[native code\]\s*\}\s*$/.test(src)) return { names: [undefined], rest: true };
  const scan = new SourceScanner(src);

  // Find the parameter list: the first top-level "(", past a quoted or computed method name;
  // or, for `x => ...`, the lone identifier before "=>".
  let lastIdent: string | undefined;
  for (;;) {
    scan.skipTrivia();
    const ch = src[scan.pos];
    if (ch === undefined || ch === '{') return { names: [], rest: false }; // e.g. a class
    if (ch === '(') break;
    if (ch === '=' && src[scan.pos + 1] === '>') {
      return { names: lastIdent === undefined ? [] : [lastIdent], rest: false };
    }
    if (ch === '"' || ch === "'" || ch === '`') {
      scan.skipLiteral();
      lastIdent = undefined;
    } else if (ch === '[') {
      scan.skipGroup();
      lastIdent = undefined;
    } else {
      const ident = scan.readIdentifier();
      if (ident === undefined) scan.pos++;
      lastIdent = ident;
    }
  }

  scan.pos++; // past "("
  const names: (string | undefined)[] = [];
  let rest = false;
  for (;;) {
    scan.skipTrivia();
    if (scan.pos >= src.length || src[scan.pos] === ')') break;
    if (src.startsWith('...', scan.pos)) {
      rest = true;
      scan.pos += 3;
      scan.skipTrivia();
    }
    const ch = src[scan.pos];
    if (ch === '{' || ch === '[') {
      scan.skipGroup();
      names.push(undefined);
    } else {
      names.push(scan.readIdentifier());
    }
    if (scan.scanUntil(',)') !== ',') break; // skips a default value
    scan.pos++;
  }
  return { names, rest };
}
