/**
 * Error texts, one factory each, so every message says what happened and what to do.
 * @internal
 */
const list = (keys: readonly string[]): string => keys.map((k) => `"${k}"`).join(', ');
const show = (value: unknown): string => {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'function') return 'a function';
  if (Array.isArray(value)) return 'an array';
  if (value !== null && typeof value === 'object') return 'an object';
  return String(value);
};
export { show as describeValue };

export const LOCK_NOT_ACQUIRED = (keys: readonly string[], waitedMs: number) =>
  `Lock ${list(keys)} is held by another caller; gave up after waiting ${Math.round(waitedMs)} ms ` +
  `(waitTimeout). Retry later, or raise waitTimeout for this call.`;

export const LOCK_BACKEND_FAILED = (
  keys: readonly string[],
  op: string,
  failures: readonly Error[],
) =>
  `Could not ${op} lock ${list(keys)}: Redis failed (${failures
    .map((f) => f.message)
    .slice(0, 3)
    .join('; ')}). Check that the lock servers are reachable.`;

export const LOCK_LOST = (keys: readonly string[], reason: string) => {
  switch (reason) {
    case 'maxHold':
      return `Lock ${list(keys)} reached maxHold and is no longer renewed; stop acting on it.`;
    case 'expired':
      return `Lock ${list(keys)} expired: renewals failed until the lease ran out; another caller may hold it now.`;
    case 'shutdown':
      return `Lock ${list(keys)} was released because the application is shutting down.`;
    default:
      return `Lock ${list(keys)} was lost: a renewal found it gone or owned by another holder.`;
  }
};

export const ALL_SEGMENTS_EXHAUSTED = (keys: readonly string[], segments: number) =>
  `No segment of ${list(keys)} can serve the call: all ${segments} slices are exhausted. ` +
  `Replenish them (LockService.resetSegments makes them usable at once).`;

export const BAD_OPTION = (field: string, value: unknown, expected: string) =>
  `Invalid nest-locked option "${field}": got ${show(value)}, expected ${expected}.`;

export const UNKNOWN_CLIENT = (name: string, known: readonly string[]) =>
  `Unknown lock client group "${name}". Configured groups: ${known.map((k) => `"${k}"`).join(', ')}. ` +
  `Add it to RedlockModule.forRoot({ clients: { ${name}: [...] } }) or fix the "client" option.`;

export const NO_LOCK_SERVICE = (where: string) =>
  `@Locked on ${where} found no LockService: the instance was not created by Nest, or ` +
  `RedlockModule.forRoot() is not imported (it is global by default; with isGlobal: false import it ` +
  `into this module).`;

// Lock keys (lib/key-template.ts). Values are described by kind, never echoed: a key error may
// become a 400 response, and the arguments are user input.

const keyTemplate = (template: string, where: string | undefined) =>
  `Lock key template ${JSON.stringify(template)}${where === undefined ? '' : ` (${where})`}`;

const kind = (value: unknown): string => {
  if (value === '') return 'an empty string';
  if (typeof value === 'symbol') return 'a symbol';
  if (Array.isArray(value)) return value.length === 0 ? 'an empty array' : 'an array';
  if (value instanceof Promise) return 'a Promise';
  if (value !== null && typeof value === 'object') {
    let name: unknown;
    try {
      name = (value as { constructor?: { name?: unknown } }).constructor?.name;
    } catch {
      name = undefined; // a hostile Proxy or getter must not replace the key error
    }
    return typeof name === 'string' && name !== '' && name !== 'Object'
      ? `an object (${name})`
      : 'an object';
  }
  if (typeof value === 'string') return 'a string';
  return show(value);
};

const errorText = (error: unknown) => (error instanceof Error ? error.message : kind(error));

const paramList = (names: readonly (string | undefined)[], rest: boolean) =>
  `(${names
    .map((n, i) => `${rest && i === names.length - 1 ? '...' : ''}${n ?? '<destructured>'}`)
    .join(', ')})`;

export const KEY_TEMPLATE_EMPTY = (where: string | undefined) =>
  `${keyTemplate('', where)} is empty; a key needs text, such as 'product:{id}'.`;

export const KEY_TEMPLATE_NOT_STRING = (where: string, index: number, value: unknown) =>
  `Lock key templates of ${where}: element ${index} is ${kind(value)}; every template must be a ` +
  `string such as 'product:{id}' (use the function form to build keys in code).`;

export const KEY_SOURCE_INVALID = (where: string, value: unknown) =>
  `Lock key of ${where} must be a template string, a non-empty array of templates, or a function ` +
  `returning keys; got ${kind(value)}.`;

export const KEY_TEMPLATE_UNCLOSED = (template: string, where: string | undefined, at: number) =>
  `${keyTemplate(template, where)}: the "{" at index ${at} is never closed; close the placeholder ` +
  `with "}" or write "{{" for a literal brace.`;

export const KEY_TEMPLATE_UNOPENED = (template: string, where: string | undefined, at: number) =>
  `${keyTemplate(template, where)}: the "}" at index ${at} closes nothing; write "}}" for a ` +
  `literal brace.`;

export const KEY_PLACEHOLDER_EMPTY = (template: string, where: string | undefined) =>
  `${keyTemplate(template, where)}: placeholder {} is empty; name a parameter ({id}) or an ` +
  `argument index ({0}).`;

export const KEY_PLACEHOLDER_WHITESPACE = (
  template: string,
  where: string | undefined,
  expr: string,
) =>
  `${keyTemplate(template, where)}: placeholder {${expr}} contains whitespace; write ` +
  `{${expr.replace(/\s+/g, '')}}.`;

export const KEY_PLACEHOLDER_SYNTAX = (template: string, where: string | undefined, expr: string) =>
  `${keyTemplate(template, where)}: placeholder {${expr}} is not a parameter name or argument ` +
  `index, optionally followed by a dot-separated property path ({id}, {0}, {dto.customer.id}, ` +
  `{0.items.2.sku}); build anything else with the function form.`;

export const KEY_PLACEHOLDERS_ADJACENT = (
  template: string,
  where: string | undefined,
  left: string,
  right: string,
) =>
  `${keyTemplate(template, where)}: placeholders {${left}} and {${right}} touch, so ("ab", "c") ` +
  `and ("a", "bc") would give the same key; separate them with ":", as in {${left}}:{${right}}.`;

export const KEY_UNKNOWN_PARAMETER = (
  template: string,
  where: string | undefined,
  expr: string,
  names: readonly (string | undefined)[],
  rest: boolean,
) =>
  `${keyTemplate(template, where)}: placeholder {${expr}} names no parameter of the method, ` +
  `whose parameters are ${paramList(names, rest)}; ` +
  (names.includes(undefined)
    ? `some names are not available (destructured parameters, or a method wrapped by another ` +
      `decorator), so use an argument index with a path ({0}, {0.customer.id}) or the function ` +
      `form (...args) => string.`
    : rest && names.length === 1
      ? `if another decorator wrapped the method before this one, put the lock decorator below ` +
        `it, or use an argument index such as {0}.`
      : `use one of these names or an argument index such as {0}.`);

export const KEY_INDEX_OUT_OF_RANGE = (
  template: string,
  where: string | undefined,
  expr: string,
  index: number,
  names: readonly (string | undefined)[],
) =>
  `${keyTemplate(template, where)}: placeholder {${expr}} reads argument ${index}, but the ` +
  `method declares ${names.length} parameter${names.length === 1 ? '' : 's'} ` +
  `${paramList(names, false)} and indices start at 0; read undeclared arguments with the ` +
  `function form.`;

export const KEY_REST_PLACEHOLDER = (template: string, where: string | undefined, expr: string) =>
  `${keyTemplate(template, where)}: placeholder {${expr}} is the rest parameter, an array; name ` +
  `one element, such as {${expr}.0}.`;

export const KEY_BAD_VALUE = (
  template: string,
  where: string | undefined,
  placeholder: string,
  value: unknown,
) =>
  `${keyTemplate(template, where)}: placeholder {${placeholder}} is ${kind(value)}; pass a ` +
  `non-empty string, number, bigint or boolean` +
  (value !== null && typeof value === 'object'
    ? `, or point the placeholder at one of its fields: {${placeholder}.<field>}.`
    : '.');

export const KEY_BROKEN_PATH = (
  template: string,
  where: string | undefined,
  placeholder: string,
  readPath: string,
  value: unknown,
) =>
  `${keyTemplate(template, where)}: placeholder {${placeholder}} cannot be read: ${readPath} is ` +
  `${kind(value)}; pass an argument that has this path, or use the function form to handle ` +
  `its absence.`;

export const KEY_PATH_THREW = (
  template: string,
  where: string | undefined,
  placeholder: string,
  readPath: string,
  error: unknown,
) =>
  `${keyTemplate(template, where)}: reading placeholder {${placeholder}} threw at ${readPath}: ` +
  `${errorText(error)} (see the cause).`;

export const KEY_TOO_LONG = (
  template: string,
  where: string | undefined,
  limit: number,
  bytes: number | undefined,
  placeholder: string | undefined,
) =>
  `${keyTemplate(template, where)}: ` +
  (bytes === undefined
    ? `the value of placeholder {${placeholder}} alone is over the ${limit}-byte key limit`
    : `the rendered key is ${bytes} bytes, over the ${limit}-byte limit` +
      (placeholder === undefined ? '' : ` (placeholder {${placeholder}} is its longest part)`)) +
  `; lock on a shorter value, such as an id or a hash.`;

export const KEY_FUNCTION_THREW = (where: string, error: unknown) =>
  `The lock key function of ${where} threw: ${errorText(error)} (see the cause). Nothing was ` +
  `locked.`;

export const KEY_FUNCTION_BAD_RESULT = (where: string, value: unknown) =>
  `The lock key function of ${where} returned ${kind(value)}; return a non-empty string or a ` +
  `non-empty array of strings` +
  (value instanceof Promise ? `, synchronously (it must not be async).` : '.');

export const RAW_KEY_INVALID = (source: string, value: unknown, limit: number) =>
  `Invalid lock key (${source}): got ${kind(value)}; a key is a non-empty string of at most ` +
  `${limit} UTF-8 bytes.`;

export const RAW_KEY_TOO_LONG = (source: string, bytes: number, limit: number) =>
  `Invalid lock key (${source}): it is ${bytes} UTF-8 bytes, over the ${limit}-byte limit; lock on ` +
  `a shorter value, such as an id or a hash.`;
