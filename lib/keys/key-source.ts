import { LockKeyError } from '../errors';
import {
  KEY_FUNCTION_BAD_RESULT,
  KEY_FUNCTION_THREW,
  KEY_SOURCE_INVALID,
  KEY_TEMPLATE_NOT_STRING,
} from './key.messages';
import { compileTemplate } from './key-template';
import { getParamNames, type ParamNames } from './param-names';
import { rawKeyList } from './raw-key';

/**
 * What `@Locked` and `LockService` accept as the key of a lock:
 *
 * - a template, `'product:{id}'`, checked against the method's parameters at decoration time so a
 *   typo fails at startup instead of locking on `product:undefined` in production;
 * - several templates, `['account:{from}', 'account:{to}']`, locked all-or-nothing;
 * - a function of the method's arguments, for keys a template cannot express. Its result is used
 *   as written (not encoded): whoever composes a key in code owns its structure. It is called
 *   with the instance as `this`: write it as a `function` with a `this` parameter to read
 *   instance state (an arrow function has no `this` of its own).
 *
 * @example
 * ```ts
 * const template: KeySource = 'order:{dto.customer.id}:{0.items.0.sku}';
 * const templates: KeySource = ['account:{from}', 'account:{to}'];
 * const fn: KeySource<[Account, Account]> = (from, to) => [`account:${from.id}`, `acct:${to.id}`];
 * // On a method of TenantService: the instance's state too.
 * const own = function (this: TenantService, id: string) { return `${this.tenant}:order:${id}`; };
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
export type KeyRenderer = (args: readonly unknown[], self?: unknown) => string[];

/**
 * Compiles a key source once, at decoration time, into a renderer for the hot path: templates
 * become literal parts plus property accessors, so a call does no parsing, no regex and, for
 * values that need no escaping, no copying. Every mistake a template can contain (syntax, a
 * parameter that does not exist, an index past the parameter list) fails here, at startup, with
 * the method's actual parameters in the message.
 *
 * Values are percent-encoded (`%`, `:`, `{`, `}`, `*`, `?`, `[`, `]`, `\`, whitespace, control
 * and non-ASCII characters) so an argument like `'1:seg:2'` cannot forge another key. A value
 * followed by another placeholder also encodes the character that starts the text between them
 * (`-` in `{a}-{b}`), so `('x-y', 'z')` and `('x', 'y-z')` give different keys: distinct
 * argument lists always render distinct keys.
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

  let params: ParamNames | undefined;
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

/** The function form: its keys are checked (non-empty, not too long) but used as returned. */
function compileKeyFunction<A extends unknown[]>(
  fn: (...args: A) => string | readonly string[],
  where: string,
): KeyRenderer {
  const source = `key function of ${where}`;
  const invalid = (result: unknown) => KEY_FUNCTION_BAD_RESULT(where, result);
  return (args, self) => {
    let result: unknown;
    try {
      // The instance as `this`: a key may use instance state (request-scoped or not).
      result = Reflect.apply(fn, self, args);
    } catch (error) {
      throw new LockKeyError(KEY_FUNCTION_THREW(where, error), 'fn', undefined, error);
    }
    return rawKeyList(result, source, 'fn', invalid);
  };
}
