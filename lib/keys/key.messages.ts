import { describeKind } from '../redlock.messages';

/**
 * The messages of lock keys (`keys/`): template grammar, placeholders, values, raw keys, and the
 * compile-time messages `template-check.ts` shows in TypeScript's errors. Values are described by
 * kind, never echoed: a key error may become a 400 response, and the arguments are user input.
 */

const keyTemplate = (template: string, where: string | undefined) =>
  `Lock key template ${JSON.stringify(template)}${where === undefined ? '' : ` (${where})`}`;

const errorText = (error: unknown) =>
  error instanceof Error ? error.message : describeKind(error);

const paramList = (names: readonly (string | undefined)[], rest: boolean) =>
  `(${names
    .map((n, i) => `${rest && i === names.length - 1 ? '...' : ''}${n ?? '<destructured>'}`)
    .join(', ')})`;

export const KEY_TEMPLATE_EMPTY = (where: string | undefined) =>
  `${keyTemplate('', where)} is empty; a key needs text, such as 'product:{id}'.`;

export const KEY_TEMPLATE_NOT_STRING = (where: string, index: number, value: unknown) =>
  `Lock key templates of ${where}: element ${index} is ${describeKind(value)}; every template must be a ` +
  `string such as 'product:{id}' (use the function form to build keys in code).`;

export const KEY_SOURCE_INVALID = (where: string, value: unknown) =>
  `Lock key of ${where} must be a template string, a non-empty array of templates, or a function ` +
  `returning keys; got ${describeKind(value)}.`;

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

export const KEY_PERCENT_AFTER_PLACEHOLDER = (
  template: string,
  where: string | undefined,
  placeholder: string,
) =>
  `${keyTemplate(template, where)}: the text after placeholder {${placeholder}} starts with "%", ` +
  `which encoded values contain, so two different argument lists could give the same key; start ` +
  `it with another character, such as ":".`;

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
  `${keyTemplate(template, where)}: placeholder {${placeholder}} is ${describeKind(value)}; pass a ` +
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
  `${describeKind(value)}; pass an argument that has this path, or use the function form to handle ` +
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
  `The lock key function of ${where} returned ${describeKind(value)}; return a non-empty string or a ` +
  `non-empty array of strings` +
  (value instanceof Promise ? `, synchronously (it must not be async).` : '.');

export const RAW_KEY_INVALID = (source: string, value: unknown, limit: number) =>
  `Invalid lock key (${source}): got ${describeKind(value)}; a key is a non-empty string of at most ` +
  `${limit} UTF-8 bytes.`;

export const RAW_KEYS_INVALID = (where: string, value: unknown) =>
  Array.isArray(value) && value.length === 0
    ? `${where} got an empty array of lock keys: there is nothing to lock. Pass at least one ` +
      `key, such as 'product:42'.`
    : `${where} takes a lock key or a non-empty array of keys; got ${describeKind(value)}. Pass a ` +
      `string such as 'product:42', or an array such as ['account:A', 'account:B'].`;

export const RAW_KEY_TOO_LONG = (source: string, bytes: number, limit: number) =>
  `Invalid lock key (${source}): it is ${bytes} UTF-8 bytes, over the ${limit}-byte limit; lock on ` +
  `a shorter value, such as an id or a hash.`;

export const RAW_KEY_LONE_SURROGATE = (source: string) =>
  `Invalid lock key (${source}): it holds a lone surrogate (half of a UTF-16 pair), which Redis ` +
  `would store as U+FFFD, the same as any other lone surrogate. Lock on well-formed text ` +
  `(String.prototype.toWellFormed()), or use a key template, which encodes such values.`;

// Compile-time messages of key templates (types; TypeScript shows them in its errors).

export type TYPE_TEMPLATE_UNCLOSED = 'a "{" is never closed (write "{{" for a literal brace)';
export type TYPE_TEMPLATE_UNOPENED = 'a "}" closes nothing (write "}}" for a literal brace)';
export type TYPE_PLACEHOLDER_EMPTY = 'placeholder {} is empty; name a parameter or an index';
export type TYPE_PLACEHOLDERS_ADJACENT =
  'two placeholders touch; separate them with text such as ":"';
export type TYPE_PLACEHOLDER_INDEX_PAST<
  Expr extends string,
  Index extends string,
  Count extends number,
> = `{${Expr}} reads argument ${Index}, but the method has ${Count} parameters (indices start at 0)`;
export type TYPE_PLACEHOLDER_NO_PROPERTY<
  Expr extends string,
  Read extends string,
  Property extends string,
> = `{${Expr}}: argument ${Read} has no property "${Property}"`;
export type TYPE_PLACEHOLDER_BAD_VALUE<Expr extends string> =
  `{${Expr}} is not a string, number, bigint or boolean; a key cannot be made of an object`;
