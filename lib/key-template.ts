import { LockKeyError } from './errors';
import {
  KEY_BAD_VALUE,
  KEY_BROKEN_PATH,
  KEY_FUNCTION_BAD_RESULT,
  KEY_FUNCTION_THREW,
  KEY_INDEX_OUT_OF_RANGE,
  KEY_PATH_THREW,
  KEY_PLACEHOLDER_EMPTY,
  KEY_PLACEHOLDER_SYNTAX,
  KEY_PLACEHOLDER_WHITESPACE,
  KEY_PLACEHOLDERS_ADJACENT,
  KEY_REST_PLACEHOLDER,
  KEY_SOURCE_INVALID,
  KEY_TEMPLATE_EMPTY,
  KEY_TEMPLATE_NOT_STRING,
  KEY_TEMPLATE_UNCLOSED,
  KEY_TEMPLATE_UNOPENED,
  KEY_TOO_LONG,
  KEY_UNKNOWN_PARAMETER,
  RAW_KEY_INVALID,
  RAW_KEY_TOO_LONG,
} from './redlock.messages';

/**
 * What `@Locked` and `LockService` accept as the key of a lock:
 *
 * - a template, `'product:{id}'`, checked against the method's parameters at decoration time so a
 *   typo fails at startup instead of locking on `product:undefined` in production;
 * - several templates, `['account:{from}', 'account:{to}']`, locked all-or-nothing;
 * - a function of the method's arguments, for keys a template cannot express. Its result is used
 *   as written (not encoded): whoever composes a key in code owns its structure.
 *
 * @example
 * ```ts
 * const template: KeySource = 'order:{dto.customer.id}:{0.items.0.sku}';
 * const templates: KeySource = ['account:{from}', 'account:{to}'];
 * const fn: KeySource<[Account, Account]> = (from, to) => [`account:${from.id}`, `acct:${to.id}`];
 * ```
 * @publicApi
 */
export type KeySource<A extends unknown[] = unknown[]> =
  string | readonly string[] | ((...args: A) => string | readonly string[]);

/**
 * Renders the keys of one call from its arguments, in template order. It neither dedupes nor
 * sorts: the lock layer does that once over every key, so the order in which two calls take the
 * same keys can never differ (which is what keeps opposite transfers from deadlocking).
 *
 * Each call returns a fresh array the caller may sort in place.
 */
export type KeyRenderer = (args: readonly unknown[]) => string[];

/**
 * Longest key accepted, in UTF-8 bytes. Redis would take far longer keys, but a key this long
 * almost always means a whole payload ended up in it, which costs memory and bandwidth on every
 * acquire and renewal; lock on an id or a hash instead.
 */
export const MAX_KEY_BYTES = 1024;

/** Where a placeholder sits, for error messages (only read on the error path). */
interface Site {
  readonly template: string;
  readonly where: string | undefined;
  readonly placeholder: string;
}

/** Reads one placeholder's raw value from the call's arguments. */
type Accessor = (args: readonly unknown[]) => unknown;

interface ParamInfo {
  readonly names: (string | undefined)[];
  readonly rest: boolean;
}

/**
 * Compiles a key source once, at decoration time, into a renderer for the hot path: templates
 * become literal parts plus property accessors, so a call does no parsing, no regex and, for
 * values that need no escaping, no copying. Every mistake a template can contain (syntax, a
 * parameter that does not exist, an index past the parameter list) fails here, at startup, with
 * the method's actual parameters in the message.
 *
 * Values are percent-encoded (`%`, `:`, `{`, `}`, `*`, `?`, `[`, `]`, `\`, whitespace, control
 * and non-ASCII characters) so an argument like `'1:seg:2'` cannot forge another key. Keep
 * placeholders separated by `:` (or another encoded character): with `{a}-{b}`, `('x-y', 'z')`
 * and `('x', 'y-z')` would collide, since `-` is left as is.
 *
 * @param fn the decorated method; its parameter names are read once from its source.
 * @param where `Class.method`, named in every error message.
 * @throws LockKeyError for any problem in the source itself.
 * @example
 * ```ts
 * class ProductService {
 *   purchase(id: number, dto: { customer: { id: string } }) {}
 * }
 * const fn = ProductService.prototype.purchase;
 * const render = compileKeySource('product:{id}:{dto.customer.id}', fn, 'ProductService.purchase');
 * render([42, { customer: { id: 'a:b' } }]); // ['product:42:a%3Ab']
 * render([undefined, {}]); // throws LockKeyError: placeholder {id} is undefined
 * ```
 */
export function compileKeySource<A extends unknown[] = unknown[]>(
  source: KeySource<A>,
  fn: (...args: never[]) => unknown,
  where: string,
): KeyRenderer {
  if (typeof source === 'function') return compileKeyFunction(source, where);

  let params: ParamInfo | undefined;
  const getParams = () => (params ??= getParamNames(fn));
  if (typeof source === 'string') {
    const render = compileTemplate(source, where, getParams);
    return (args) => [render(args)];
  }
  if (Array.isArray(source)) {
    const templates: readonly unknown[] = source;
    if (templates.length === 0) throw new LockKeyError(KEY_SOURCE_INVALID(where, source), '');
    const renders = templates.map((t, i) => {
      if (typeof t !== 'string') {
        throw new LockKeyError(KEY_TEMPLATE_NOT_STRING(where, i, t), '');
      }
      return compileTemplate(t, where, getParams);
    });
    const count = renders.length;
    if (count === 2) {
      const [first, second] = renders;
      return (args) => [first(args), second(args)];
    }
    return (args) => {
      const keys = new Array<string>(count);
      for (let i = 0; i < count; i++) keys[i] = renders[i](args);
      return keys;
    };
  }
  throw new LockKeyError(KEY_SOURCE_INVALID(where, source), '');
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
export function getParamNames(fn: (...args: never[]) => unknown): {
  names: (string | undefined)[];
  rest: boolean;
} {
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

/**
 * Encodes one placeholder value. Only scalars with an unambiguous text form are accepted:
 * anything else (`undefined`, `null`, `''`, `NaN`, objects...) would make every caller render the
 * same key, turning a per-entity lock into a global one, so it throws instead.
 *
 * Encoding is injective: `%` itself is encoded, so distinct values never render alike, and no
 * value can contain the `:` that separates segments. Numbers render with `String(n)`, so `42` and
 * `'42'` lock the same key, on purpose (a route param and a parsed body field agree).
 *
 * @throws LockKeyError naming `template` and `placeholder`, with `.placeholder` set.
 */
export function encodeKeyValue(value: unknown, template: string, placeholder: string): string {
  return encodeValue(value, { template, where: undefined, placeholder });
}

/**
 * Checks a key built by user code (the function form, `LockService.using` and friends). Such keys
 * are not encoded, since their author chose their structure, but an empty or oversized key is
 * always a bug, best reported before anything is sent to Redis.
 *
 * @param source who supplied the key, for the message (`LockService.using`).
 * @throws LockKeyError with `template` set to `source`.
 */
export function assertRawKey(key: unknown, source: string): string {
  return rawKey(key, source, source);
}

// ---------------------------------------------------------------------------------------------
// Values

/** ASCII characters a value must not contain verbatim (1 = percent-encode). */
const ESCAPE = new Uint8Array(128);
for (let c = 0; c <= 0x20; c++) ESCAPE[c] = 1; // control characters and space
ESCAPE[0x7f] = 1;
for (const ch of '%:{}*?[]\\') ESCAPE[ch.charCodeAt(0)] = 1;

/** `%XX` for every byte, uppercase hex. */
const HEX: readonly string[] = Array.from(
  { length: 256 },
  (_, b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`,
);

function encodeValue(value: unknown, site: Site): string {
  switch (typeof value) {
    case 'string':
      if (value.length === 0) break;
      if (value.length > MAX_KEY_BYTES) throw tooLong(site, undefined, site.placeholder);
      return escapeString(value, site);
    case 'number':
      if (Number.isFinite(value)) return String(value); // String(-0) is already '0'
      break;
    case 'bigint':
      return String(value);
    case 'boolean':
      return value ? 'true' : 'false';
  }
  throw new LockKeyError(
    KEY_BAD_VALUE(site.template, site.where, site.placeholder, value),
    site.template,
    site.placeholder,
  );
}

function escapeString(value: string, site: Site): string {
  const length = value.length;
  let i = 0;
  for (; i < length; i++) {
    const c = value.charCodeAt(i);
    if (c > 0x7f || ESCAPE[c] === 1) break;
  }
  if (i === length) return value;

  let out = value.slice(0, i);
  let run = i; // start of the current verbatim run
  for (; i < length; i++) {
    let c = value.charCodeAt(i);
    if (c <= 0x7f && ESCAPE[c] === 0) continue;
    if (run < i) out += value.slice(run, i);
    if (c <= 0x7f) {
      out += HEX[c];
    } else if (c < 0x800) {
      out += HEX[0xc0 | (c >> 6)] + HEX[0x80 | (c & 0x3f)];
    } else {
      const next = value.charCodeAt(i + 1);
      if (c >= 0xd800 && c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (next - 0xdc00);
        i++;
        out +=
          HEX[0xf0 | (c >> 18)] +
          HEX[0x80 | ((c >> 12) & 0x3f)] +
          HEX[0x80 | ((c >> 6) & 0x3f)] +
          HEX[0x80 | (c & 0x3f)];
      } else {
        // A lone surrogate is encoded as its own code point (WTF-8) rather than as U+FFFD, so
        // it cannot collide with a real U+FFFD.
        out += HEX[0xe0 | (c >> 12)] + HEX[0x80 | ((c >> 6) & 0x3f)] + HEX[0x80 | (c & 0x3f)];
      }
    }
    run = i + 1;
  }
  if (run < length) out += value.slice(run);
  if (out.length > MAX_KEY_BYTES) throw tooLong(site, undefined, site.placeholder);
  return out;
}

function tooLong(site: Site, bytes: number | undefined, placeholder: string | undefined) {
  return new LockKeyError(
    KEY_TOO_LONG(site.template, site.where, MAX_KEY_BYTES, bytes, placeholder),
    site.template,
    placeholder,
  );
}

/** UTF-8 length, counting a lone surrogate as 3 bytes (as Buffer.byteLength does). */
function utf8Length(text: string): number {
  let bytes = text.length;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) bytes += 1;
    else if (c >= 0xd800 && c <= 0xdbff && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      bytes += 2; // 4 bytes for 2 code units
      i++;
    } else bytes += 2;
  }
  return bytes;
}

function rawKey(key: unknown, source: string, template: string): string {
  if (typeof key !== 'string' || key.length === 0) {
    throw new LockKeyError(RAW_KEY_INVALID(source, key, MAX_KEY_BYTES), template);
  }
  // A UTF-16 code unit is at most 3 UTF-8 bytes, and at least 1.
  if (key.length * 3 > MAX_KEY_BYTES) {
    const bytes = utf8Length(key);
    if (bytes > MAX_KEY_BYTES) {
      throw new LockKeyError(RAW_KEY_TOO_LONG(source, bytes, MAX_KEY_BYTES), template);
    }
  }
  return key;
}

function withCause<E extends Error>(error: E, cause: unknown): E {
  // LockKeyError's constructor takes no cause; define it as `new Error(msg, { cause })` would.
  Object.defineProperty(error, 'cause', { value: cause, writable: true, configurable: true });
  return error;
}

// ---------------------------------------------------------------------------------------------
// Function form

function compileKeyFunction<A extends unknown[]>(
  fn: (...args: A) => string | readonly string[],
  where: string,
): KeyRenderer {
  const source = `key function of ${where}`;
  return (args) => {
    let result: unknown;
    try {
      result = Reflect.apply(fn, undefined, args);
    } catch (error) {
      throw withCause(new LockKeyError(KEY_FUNCTION_THREW(where, error), 'fn'), error);
    }
    if (typeof result === 'string') return [rawKey(result, source, 'fn')];
    if (Array.isArray(result) && result.length > 0) {
      const list: readonly unknown[] = result;
      const keys = new Array<string>(list.length);
      for (let i = 0; i < list.length; i++) {
        keys[i] = rawKey(list[i], `${source}, element ${i}`, 'fn');
      }
      return keys;
    }
    throw new LockKeyError(KEY_FUNCTION_BAD_RESULT(where, result), 'fn');
  };
}

// ---------------------------------------------------------------------------------------------
// Templates

const INDEX = /^(?:0|[1-9][0-9]*)$/;
const IDENTIFIER = /^[\p{ID_Start}$_][\p{ID_Continue}$\u200C\u200D]*$/u;
const WHITESPACE = /\s/;

interface Placeholder {
  readonly expr: string;
  readonly at: number;
}

/** Splits a template into literal text and placeholders, resolving `{{` and `}}`. */
function parseTemplate(
  template: string,
  where: string,
): { literals: string[]; placeholders: Placeholder[] } {
  const literals: string[] = [];
  const placeholders: Placeholder[] = [];
  let text = '';
  for (let i = 0; i < template.length;) {
    const ch = template[i];
    if (ch === '{') {
      if (template[i + 1] === '{') {
        text += '{';
        i += 2;
        continue;
      }
      const close = template.indexOf('}', i + 1);
      const reopen = template.indexOf('{', i + 1);
      if (close < 0 || (reopen >= 0 && reopen < close)) {
        throw new LockKeyError(KEY_TEMPLATE_UNCLOSED(template, where, i), template);
      }
      const expr = template.slice(i + 1, close);
      if (expr === '') throw new LockKeyError(KEY_PLACEHOLDER_EMPTY(template, where), template, '');
      if (text === '' && placeholders.length > 0) {
        const left = placeholders[placeholders.length - 1].expr;
        throw new LockKeyError(
          KEY_PLACEHOLDERS_ADJACENT(template, where, left, expr),
          template,
          expr,
        );
      }
      literals.push(text);
      placeholders.push({ expr, at: i });
      text = '';
      i = close + 1;
    } else if (ch === '}') {
      if (template[i + 1] !== '}') {
        throw new LockKeyError(KEY_TEMPLATE_UNOPENED(template, where, i), template);
      }
      text += '}';
      i += 2;
    } else {
      text += ch;
      i++;
    }
  }
  literals.push(text);
  return { literals, placeholders };
}

function compileTemplate(
  template: string,
  where: string,
  getParams: () => ParamInfo,
): (args: readonly unknown[]) => string {
  if (template === '') throw new LockKeyError(KEY_TEMPLATE_EMPTY(where), template);
  const { literals, placeholders } = parseTemplate(template, where);
  const accessors = placeholders.map((p) => compilePlaceholder(template, where, p, getParams));
  const sites: Site[] = placeholders.map((p) => ({ template, where, placeholder: p.expr }));

  const literalText = literals.join('');
  const literalBytes = utf8Length(literalText);
  // Encoded values are ASCII, so a key's byte length is its string length plus this.
  const extraBytes = literalBytes - literalText.length;
  const siteOf: Site = { template, where, placeholder: '' };
  if (literalBytes > MAX_KEY_BYTES) throw tooLong(siteOf, literalBytes, undefined);

  const check = (key: string, args: readonly unknown[]): string => {
    if (key.length + extraBytes <= MAX_KEY_BYTES) return key;
    // Error path only: name the biggest part, the one to shorten.
    const sizes = accessors.map((read, i) => encodeValue(read(args), sites[i]).length);
    const longest = sizes.indexOf(Math.max(...sizes));
    throw tooLong(siteOf, key.length + extraBytes, sites[longest].placeholder);
  };

  const count = accessors.length;
  if (count === 0) return () => literalText;
  if (count === 1) {
    const [before, after] = literals;
    const [read] = accessors;
    const [site] = sites;
    return (args) => check(before + encodeValue(read(args), site) + after, args);
  }
  if (count === 2) {
    const [l0, l1, l2] = literals;
    const [r0, r1] = accessors;
    const [s0, s1] = sites;
    return (args) =>
      check(l0 + encodeValue(r0(args), s0) + l1 + encodeValue(r1(args), s1) + l2, args);
  }
  return (args) => {
    let key = literals[0];
    for (let i = 0; i < count; i++) {
      key += encodeValue(accessors[i](args), sites[i]) + literals[i + 1];
    }
    return check(key, args);
  };
}

/** Resolves `{expr}` against the parameter list into an accessor, failing at decoration time. */
function compilePlaceholder(
  template: string,
  where: string,
  { expr }: Placeholder,
  getParams: () => ParamInfo,
): Accessor {
  if (WHITESPACE.test(expr)) {
    throw new LockKeyError(KEY_PLACEHOLDER_WHITESPACE(template, where, expr), template, expr);
  }
  const segments = expr.split('.');
  const [head] = segments;
  if (!segments.every((s) => INDEX.test(s) || IDENTIFIER.test(s)))
    throw new LockKeyError(KEY_PLACEHOLDER_SYNTAX(template, where, expr), template, expr);

  const { names, rest } = getParams();
  const restAt = rest ? names.length - 1 : -1;
  let index: number;
  let pathFrom = 1; // segments[pathFrom..] are read as properties
  let fromRest = false;
  if (INDEX.test(head)) {
    index = Number(head);
    if (!rest && index >= names.length) {
      throw new LockKeyError(
        KEY_INDEX_OUT_OF_RANGE(template, where, expr, index, names),
        template,
        expr,
      );
    }
  } else {
    index = names.indexOf(head);
    if (index < 0) {
      throw new LockKeyError(
        KEY_UNKNOWN_PARAMETER(template, where, expr, names, rest),
        template,
        expr,
      );
    }
    if (index === restAt) {
      if (segments.length === 1) {
        throw new LockKeyError(KEY_REST_PLACEHOLDER(template, where, expr), template, expr);
      }
      if (INDEX.test(segments[1])) {
        // {args.2} is argument restAt + 2: read it directly instead of slicing per call.
        index = restAt + Number(segments[1]);
        pathFrom = 2;
      } else {
        fromRest = true; // e.g. {args.length}
      }
    }
  }

  const path = segments.slice(pathFrom);
  // labels[k]: how the value holding path[k] is written in the placeholder (for messages).
  const labels = path.map((_, k) => segments.slice(0, pathFrom + k).join('.'));
  const at = index;
  const start: Accessor = fromRest ? (args) => args.slice(at) : (args) => args[at];
  if (path.length === 0) return start;

  return (args) => {
    let value = start(args);
    for (let k = 0; k < path.length; k++) {
      if (value === undefined || value === null) {
        throw new LockKeyError(
          KEY_BROKEN_PATH(template, where, expr, labels[k], value),
          template,
          expr,
        );
      }
      try {
        value = (value as Record<string, unknown>)[path[k]];
      } catch (error) {
        const label = `${labels[k]}.${path[k]}`;
        throw withCause(
          new LockKeyError(KEY_PATH_THREW(template, where, expr, label, error), template, expr),
          error,
        );
      }
    }
    return value;
  };
}

// ---------------------------------------------------------------------------------------------
// Source scanning (decoration time only)

const IDENT_START = /[\p{ID_Start}$_]/u;
const IDENT_PART = /[\p{ID_Continue}$\u200C\u200D]/u;
const CLOSERS: Readonly<Record<string, string>> = { '(': ')', '[': ']', '{': '}' };
/** After these, a "/" starts a regular expression rather than a division. */
const REGEX_AFTER = '(,=:[!&|?{};+-*%<>~^';

/** A minimal JavaScript tokenizer: enough to skip literals, comments and nested groups. */
class SourceScanner {
  pos = 0;

  constructor(private readonly src: string) {}

  /** Skips whitespace and comments. */
  skipTrivia(): void {
    const src = this.src;
    while (this.pos < src.length) {
      const ch = src[this.pos];
      if (ch === '/' && src[this.pos + 1] === '/') {
        const end = src.indexOf('\n', this.pos + 2);
        this.pos = end < 0 ? src.length : end + 1;
      } else if (ch === '/' && src[this.pos + 1] === '*') {
        const end = src.indexOf('*/', this.pos + 2);
        this.pos = end < 0 ? src.length : end + 2;
      } else if (WHITESPACE.test(ch)) {
        this.pos++;
      } else {
        return;
      }
    }
  }

  /** Reads an identifier at the cursor, or returns undefined (cursor unchanged). */
  readIdentifier(): string | undefined {
    const src = this.src;
    const first = src.codePointAt(this.pos);
    if (first === undefined || !IDENT_START.test(String.fromCodePoint(first))) return undefined;
    const start = this.pos;
    this.pos += first > 0xffff ? 2 : 1;
    for (;;) {
      const cp = src.codePointAt(this.pos);
      if (cp === undefined || !IDENT_PART.test(String.fromCodePoint(cp))) break;
      this.pos += cp > 0xffff ? 2 : 1;
    }
    return src.slice(start, this.pos);
  }

  /** Skips a string or template literal starting at the cursor. */
  skipLiteral(): void {
    const src = this.src;
    const quote = src[this.pos++];
    while (this.pos < src.length) {
      const ch = src[this.pos];
      if (ch === '\\') {
        this.pos += 2;
      } else if (ch === quote) {
        this.pos++;
        return;
      } else if (quote === '`' && ch === '$' && src[this.pos + 1] === '{') {
        this.pos += 2;
        this.scanUntil('}');
        this.pos++;
      } else {
        this.pos++;
      }
    }
  }

  /** Skips a regular expression literal starting at the cursor (its flags read as code). */
  private skipRegex(): void {
    const src = this.src;
    let inClass = false;
    for (this.pos++; this.pos < src.length; this.pos++) {
      const ch = src[this.pos];
      if (ch === '\\') this.pos++;
      else if (ch === '[') inClass = true;
      else if (ch === ']') inClass = false;
      else if (ch === '/' && !inClass) {
        this.pos++;
        return;
      } else if (ch === '\n') return;
    }
  }

  /** Skips a balanced `(...)`, `[...]` or `{...}` group starting at the cursor. */
  skipGroup(): void {
    const close = CLOSERS[this.src[this.pos]] ?? '';
    this.pos++;
    this.scanUntil(close);
    this.pos++;
  }

  /**
   * Advances to the first character in `stops` outside any nested group or literal and returns
   * it, without consuming it ('' at the end of the source).
   */
  scanUntil(stops: string): string {
    const src = this.src;
    let previous = '='; // last significant character, for the regex heuristic
    for (;;) {
      this.skipTrivia();
      const ch = src[this.pos];
      if (ch === undefined) return '';
      if (stops.includes(ch)) return ch;
      if (ch === '"' || ch === "'" || ch === '`') {
        this.skipLiteral();
        previous = '"';
      } else if (ch === '(' || ch === '[' || ch === '{') {
        this.skipGroup();
        previous = ')';
      } else if (ch === '/' && REGEX_AFTER.includes(previous)) {
        this.skipRegex();
        previous = ')';
      } else {
        this.pos++;
        previous = ch;
      }
    }
  }
}
