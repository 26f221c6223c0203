import 'reflect-metadata';
import { LockKeyError } from '../../lib/errors';
import { encodeKeyValue } from '../../lib/keys/key-encoding';
import { MAX_KEY_BYTES } from '../../lib/keys/key-length';
import { compileKeySource, type KeyRenderer, type KeySource } from '../../lib/keys/key-source';
import { getParamNames } from '../../lib/keys/param-names';
import { assertRawKey } from '../../lib/keys/raw-key';
import { keyError } from '../support/key-error';

type AnyFn = (...args: never[]) => unknown;

class ProductService {
  purchase(id: unknown, qty: unknown) {
    return [id, qty];
  }

  order(dto: unknown, tenant: unknown) {
    return [dto, tenant];
  }

  transfer(from: unknown, to: unknown, ...rest: unknown[]) {
    return [from, to, rest];
  }

  destructured({ id }: { id: unknown }, [first]: unknown[], plain: unknown) {
    return [id, first, plain];
  }
}

const { purchase, order, transfer, destructured } = ProductService.prototype;
const WHERE = 'ProductService.purchase';

const compile = (source: KeySource, fn: AnyFn = purchase, where = WHERE): KeyRenderer =>
  compileKeySource(source, fn, where);

/** Evaluates JavaScript source as written (no TypeScript transform in between). */
const js = <T = AnyFn>(source: string): T => (0, eval)(`(${source})`) as T;
const names = (source: string) => getParamNames(js(source));

describe('key templates', () => {
  describe('grammar', () => {
    it('renders parameter names and argument indices', () => {
      expect(compile('product:{id}')([42, 1])).toEqual(['product:42']);
      expect(compile('product:{id}:qty:{1}')([42, 3])).toEqual(['product:42:qty:3']);
      expect(compile('{0}:{qty}')(['a', 'b'])).toEqual(['a:b']);
    });

    it('renders a template without placeholders as is, in a fresh array per call', () => {
      const render = compile('nightly-report');
      const first = render([]);
      expect(first).toEqual(['nightly-report']);
      expect(render([])).not.toBe(first);
    });

    it('treats {{ and }} as literal braces', () => {
      expect(compile('a{{b}}c:{id}')([42])).toEqual(['a{b}c:42']);
      expect(compile('{{{id}}}')([42])).toEqual(['{42}']);
      expect(compile('{{id}}')([42])).toEqual(['{id}']);
      expect(compile('x:{id}}}')([7])).toEqual(['x:7}']);
    });

    it('reads nested property paths from a named parameter', () => {
      const dto = { customer: { id: 'c1', address: { zip: 75001 } }, items: ['p', 'q'] };
      const render = compile('order:{dto.customer.id}:{dto.customer.address.zip}', order);
      expect(render([dto, 't'])).toEqual(['order:c1:75001']);
      expect(compile('{dto.items.1}', order)([dto, 't'])).toEqual(['q']);
    });

    it('reads property paths from an argument index, with array indices inside', () => {
      const dto = { items: [{ sku: 'a' }, { sku: 'b' }, { sku: 'c' }] };
      expect(compile('sku:{0.items.2.sku}', order)([dto, 't'])).toEqual(['sku:c']);
      expect(compile('{1.length}', order)([dto, 'tenant'])).toEqual(['6']);
    });

    it('reads getters of class instances (DTOs built by pipes)', () => {
      class Dto {
        constructor(private readonly raw: string) {}
        get sku() {
          return this.raw.toUpperCase();
        }
      }
      expect(compile('stock:{dto.sku}', order)([new Dto('ab'), 't'])).toEqual(['stock:AB']);
    });

    it('renders several templates in order, without dedupe or sorting', () => {
      const render = compile(['account:{to}', 'account:{from}', 'account:{to}'], transfer);
      expect(render(['A', 'B'])).toEqual(['account:B', 'account:A', 'account:B']);
      expect(compile(['x:{from}', 'y:{to}'], transfer)(['1', '2'])).toEqual(['x:1', 'y:2']);
      expect(compile(['only:{from}'], transfer)(['1', '2'])).toEqual(['only:1']);
    });

    it('reads rest parameters by element, by any index past them, and by property', () => {
      expect(compile('{rest.0}:{rest.1}', transfer)(['a', 'b', 'c', 'd'])).toEqual(['c:d']);
      expect(compile('{5}', transfer)(['a', 'b', 'c', 'd', 'e', 'f'])).toEqual(['f']);
      expect(compile('n:{rest.length}', transfer)(['a', 'b', 'c'])).toEqual(['n:1']);
      expect(compile('{rest.0.id}', transfer)(['a', 'b', { id: 9 }])).toEqual(['9']);
    });

    it('reads destructured parameters by index', () => {
      const render = compile('{0.id}:{1.0}:{plain}', destructured);
      expect(render([{ id: 1 }, ['f'], 'p'])).toEqual(['1:f:p']);
    });
  });

  describe('decoration-time failures', () => {
    it('rejects an unknown parameter name, listing the actual parameters', () => {
      const error = keyError(() => compile('product:{productId}'));
      expect(error.message).toContain('"product:{productId}"');
      expect(error.message).toContain(WHERE);
      expect(error.message).toContain('{productId}');
      expect(error.message).toContain('(id, qty)');
      expect(error.template).toBe('product:{productId}');
      expect(error.placeholder).toBe('productId');
    });

    it('suggests indices or the function form when names are not available', () => {
      const error = keyError(() => compile('{id}', destructured, 'ProductService.destructured'));
      expect(error.message).toContain('(<destructured>, <destructured>, plain)');
      expect(error.message).toContain('{0}');
      expect(error.message).toContain('function form');
    });

    it('accepts any index but no name for a method whose source cannot be read', () => {
      const wrapped = new Proxy(purchase, {}); // what another decorator's wrapper looks like
      expect(compile('{3.id}', wrapped)([0, 0, 0, { id: 'x' }])).toEqual(['x']);
      const error = keyError(() => compile('{id}', wrapped));
      expect(error.message).toContain('{0}');
      expect(error.message).toContain('function form');
    });

    it('rejects an index at or past the parameter count', () => {
      const error = keyError(() => compile('product:{2}'));
      expect(error.message).toContain('"product:{2}"');
      expect(error.message).toContain('{2}');
      expect(error.message).toContain('(id, qty)');
      expect(error.placeholder).toBe('2');
      expect(() => compile('{1}')).not.toThrow();
      expect(keyError(() => compile('{2.id}')).placeholder).toBe('2.id');
    });

    it.each([
      ['product:{id', 'never closed'],
      ['product:{', 'never closed'],
      ['product:{a{id}', 'never closed'],
      ['product:}', 'closes nothing'],
      ['product:id}', 'closes nothing'],
      ['{id}}', 'closes nothing'],
      ['}{id}', 'closes nothing'],
    ])('rejects unbalanced braces in %p', (template, text) => {
      const error = keyError(() => compile(template));
      expect(error.message).toContain(JSON.stringify(template));
      expect(error.message).toContain(text);
      expect(error.template).toBe(template);
    });

    it('rejects an empty placeholder', () => {
      const error = keyError(() => compile('product:{}'));
      expect(error.message).toContain('placeholder {} is empty');
      expect(error.placeholder).toBe('');
    });

    it.each(['{ id}', '{id }', '{ id }', '{dto. id}', '{\tid}'])(
      'rejects whitespace inside braces: %p',
      (template) => {
        expect(keyError(() => compile(template, order)).message).toContain('whitespace');
      },
    );

    it.each([
      '{dto..id}',
      '{dto.}',
      '{.id}',
      '{01}',
      '{0.01}',
      '{-1}',
      '{dto.x-y}',
      '{dto[0]}',
      '{dto.*}',
      '{1abc}',
    ])('rejects bad path syntax: %p', (template) => {
      const error = keyError(() => compile(template, order));
      expect(error.message).toContain('dot-separated property path');
      expect(error.placeholder).toBe(template.slice(1, -1));
    });

    it('rejects placeholders with nothing between them (ambiguous keys)', () => {
      const error = keyError(() => compile('{id}{qty}'));
      expect(error.message).toContain('{id}:{qty}');
      expect(() => compile('{id}:{qty}')).not.toThrow();
      expect(() => compile('{id}{{{qty}')).not.toThrow();
    });

    it('rejects the rest parameter as a whole (always an array)', () => {
      expect(keyError(() => compile('{rest}', transfer)).message).toContain('{rest.0}');
    });

    it('rejects empty templates and template lists, and sources of other types', () => {
      expect(keyError(() => compile('')).message).toContain('is empty');
      expect(keyError(() => compile([])).message).toContain('an empty array');
      expect(keyError(() => compile(['a:{id}', 42 as unknown as string])).message).toContain(
        'element 1 is 42',
      );
      expect(keyError(() => compile(42 as unknown as string)).message).toContain('got 42');
      expect(keyError(() => compile(['a:{id}', 'b:{nope}'])).placeholder).toBe('nope');
    });

    it('rejects a template whose literal text alone is over the limit', () => {
      expect(() => compile('x'.repeat(MAX_KEY_BYTES))).not.toThrow();
      expect(keyError(() => compile('x'.repeat(MAX_KEY_BYTES + 1))).message).toContain(
        '1025 bytes',
      );
    });
  });

  describe('values', () => {
    it('gives the documented message for an undefined value', () => {
      expect(keyError(() => compile('product:{id}')([undefined, 1])).message).toBe(
        'Lock key template "product:{id}" (ProductService.purchase): placeholder {id} is ' +
          'undefined; pass a non-empty string, number, bigint or boolean.',
      );
    });

    it.each<[string, unknown, string]>([
      ['undefined', undefined, 'is undefined'],
      ['null', null, 'is null'],
      ['an empty string', '', 'is an empty string'],
      ['NaN', NaN, 'is NaN'],
      ['Infinity', Infinity, 'is Infinity'],
      ['-Infinity', -Infinity, 'is -Infinity'],
      ['a plain object', { id: 1 }, 'is an object;'],
      ['a class instance', new Date(0), 'is an object (Date)'],
      ['an object without prototype', Object.create(null), 'is an object;'],
      ['an array', [1], 'is an array'],
      ['an empty array', [], 'is an empty array'],
      ['a symbol', Symbol('id'), 'is a symbol'],
      ['a function', () => 1, 'is a function'],
      ['a Promise', Promise.resolve(1), 'is a Promise'],
    ])('rejects %s at call time, naming template and placeholder', (_, value, text) => {
      const render = compile('product:{id}');
      const error = keyError(() => render([value, 1]));
      expect(error.message).toContain('"product:{id}"');
      expect(error.message).toContain(WHERE);
      expect(error.message).toContain(`placeholder {id} ${text}`);
      expect(error.template).toBe('product:{id}');
      expect(error.placeholder).toBe('id');
      expect(error.message).not.toContain('[object Object]');
    });

    it('rejects bad values at the end of a path too', () => {
      const error = keyError(() => compile('{dto.customer.id}', order)([{ customer: {} }, 't']));
      expect(error.message).toContain('placeholder {dto.customer.id} is undefined');
      expect(error.placeholder).toBe('dto.customer.id');
    });

    it('names the missing part of a path', () => {
      const render = compile('order:{dto.customer.id}', order);
      const missing = keyError(() => render([{}, 't']));
      expect(missing.message).toContain('dto.customer is undefined');
      expect(missing.placeholder).toBe('dto.customer.id');
      expect(keyError(() => render([null, 't'])).message).toContain('dto is null');
      const byIndex = keyError(() => compile('{0.items.2.sku}', order)([{ items: [] }, 't']));
      expect(byIndex.message).toContain('0.items.2 is undefined');
      const inRest = keyError(() => compile('{rest.0.id}', transfer)(['a', 'b']));
      expect(inRest.message).toContain('rest.0 is undefined');
    });

    it('wraps an error thrown by a getter on the path, keeping it as cause', () => {
      const boom = new Error('not loaded');
      const dto = {
        get customer(): unknown {
          throw boom;
        },
      };
      const error = keyError(() => compile('{dto.customer.id}', order)([dto, 't']));
      expect(error.message).toContain('dto.customer');
      expect(error.message).toContain('not loaded');
      expect(error.cause).toBe(boom);
    });

    it('renders numbers, bigints and booleans', () => {
      const render = compile('k:{id}');
      expect(render([42])).toEqual(['k:42']);
      expect(render(['42'])).toEqual(render([42])); // the same resource, on purpose
      expect(render([-0])).toEqual(['k:0']);
      expect(render([0])).toEqual(['k:0']);
      expect(render([-7.5])).toEqual(['k:-7.5']);
      expect(render([1e21])).toEqual(['k:1e+21']);
      expect(render([12345678901234567890n])).toEqual(['k:12345678901234567890']);
      expect(render([-1n])).toEqual(['k:-1']);
      expect(render([true])).toEqual(['k:true']);
      expect(render([false])).toEqual(['k:false']);
    });

    it('exposes the encoder with the same checks', () => {
      expect(encodeKeyValue('a:b', 't', 'p')).toBe('a%3Ab');
      expect(encodeKeyValue(5, 't', 'p')).toBe('5');
      const error = keyError(() => encodeKeyValue(null, 'user:{uid}', 'uid'));
      expect(error.message).toContain('"user:{uid}"');
      expect(error.message).toContain('{uid} is null');
      expect(error.template).toBe('user:{uid}');
      expect(error.placeholder).toBe('uid');
    });
  });

  describe('encoding', () => {
    it.each([
      ['%', '%25'],
      [':', '%3A'],
      ['{', '%7B'],
      ['}', '%7D'],
      ['*', '%2A'],
      ['?', '%3F'],
      ['[', '%5B'],
      [']', '%5D'],
      ['\\', '%5C'],
      [' ', '%20'],
      ['\t', '%09'],
      ['\n', '%0A'],
      ['\r', '%0D'],
      ['\0', '%00'],
      ['\x1f', '%1F'],
      ['\x7f', '%7F'],
      ['é', '%C3%A9'],
      ['\u00a0', '%C2%A0'],
      ['\u2028', '%E2%80%A8'],
      ['€', '%E2%82%AC'],
      ['😀', '%F0%9F%98%80'],
      ['\ud800', '%ED%A0%80'], // lone surrogate: its own bytes, not U+FFFD
    ])('encodes %j as %s', (raw, encoded) => {
      expect(encodeKeyValue(raw, 't', 'p')).toBe(encoded);
      expect(encodeKeyValue(`a${raw}b`, 't', 'p')).toBe(`a${encoded}b`);
    });

    it('leaves other printable ASCII untouched', () => {
      let safe = '';
      for (let c = 0x21; c < 0x7f; c++) {
        if (!'%:{}*?[]\\'.includes(String.fromCharCode(c))) safe += String.fromCharCode(c);
      }
      expect(safe).toHaveLength(94 - 9);
      expect(encodeKeyValue(safe, 't', 'p')).toBe(safe);
    });

    it('agrees with decodeURIComponent, so distinct values never share a key', () => {
      const samples = ['a b:c', '100%', '%25', 'ünïcödé ✓ 😀', 'x*?[y]\\z', '{0}', 'tab\there'];
      for (const value of samples) {
        expect(decodeURIComponent(encodeKeyValue(value, 't', 'p'))).toBe(value);
      }
      const tricky = ['%', '%25', '%2525', ':', '%3A', '%3a', 'é', '%C3%A9', '\ufffd', '\ud800'];
      const keys = tricky.map((v) => encodeKeyValue(v, 't', 'p'));
      expect(new Set(keys).size).toBe(tricky.length);
    });

    it('keeps values from forging other keys', () => {
      const stock = compile('stock:{id}');
      const [forged] = stock(['1:seg:2']);
      const [plain] = stock(['1']);
      expect(forged).not.toBe(plain);
      expect(forged).not.toBe(`${plain}:seg:2`);
      expect(forged).toBe('stock:1%3Aseg%3A2');

      const pair = compile('k:{id}:{qty}');
      expect(pair(['x:y', 'z'])).not.toEqual(pair(['x', 'y:z']));
      expect(compile('k:{id}')(['*'])).toEqual(['k:%2A']);
    });

    it('never expands placeholders found in values', () => {
      expect(compile('x:{id}:{qty}')(['{qty}', 'B'])).toEqual(['x:%7Bqty%7D:B']);
    });
  });

  describe('length limit', () => {
    it('accepts a key of exactly MAX_KEY_BYTES and rejects one byte more', () => {
      const render = compile('k:{id}');
      expect(render(['x'.repeat(MAX_KEY_BYTES - 2)])[0]).toHaveLength(MAX_KEY_BYTES);
      const error = keyError(() => render(['x'.repeat(MAX_KEY_BYTES - 1)]));
      expect(error.message).toContain('"k:{id}"');
      expect(error.message).toContain('1025 bytes');
      expect(error.message).toContain('1024');
      expect(error.template).toBe('k:{id}');
      expect(error.placeholder).toBe('id');
    });

    it('counts UTF-8 bytes of the literal text and of encoded values', () => {
      const render = compile('é:{id}'); // 3 bytes of literal text
      expect(() => render(['x'.repeat(MAX_KEY_BYTES - 3)])).not.toThrow();
      expect(() => render(['x'.repeat(MAX_KEY_BYTES - 2)])).toThrow(LockKeyError);
      // 200 characters, 400 UTF-8 bytes, 1200 once encoded
      expect(() => render(['é'.repeat(200)])).toThrow(LockKeyError);
    });

    it('names the longest placeholder of a key that is too long', () => {
      const render = compile('k:{id}:{qty}');
      const error = keyError(() => render(['x'.repeat(100), 'y'.repeat(1000)]));
      expect(error.placeholder).toBe('qty');
      expect(error.message).toContain('{qty}');
    });

    it('rejects a huge value without encoding it', () => {
      const error = keyError(() => compile('k:{id}')([':'.repeat(1_000_000)]));
      expect(error.placeholder).toBe('id');
      expect(error.message).toContain('1024');
    });

    it('checks raw keys', () => {
      expect(assertRawKey('a:b c', 'LockService.using')).toBe('a:b c'); // not encoded
      expect(assertRawKey('x'.repeat(MAX_KEY_BYTES), 's')).toHaveLength(MAX_KEY_BYTES);
      expect(assertRawKey('é'.repeat(MAX_KEY_BYTES / 2), 's')).toHaveLength(MAX_KEY_BYTES / 2);
      expect(assertRawKey('😀'.repeat(MAX_KEY_BYTES / 4), 's')).toBeDefined();
      expect(() => assertRawKey('x'.repeat(MAX_KEY_BYTES + 1), 's')).toThrow(LockKeyError);
      expect(() => assertRawKey('é'.repeat(MAX_KEY_BYTES / 2 + 1), 's')).toThrow(LockKeyError);
      expect(() => assertRawKey('😀'.repeat(MAX_KEY_BYTES / 4) + 'x', 's')).toThrow(/1025/);
      for (const bad of ['', undefined, null, 42, ['a'], {}]) {
        const error = keyError(() => assertRawKey(bad, 'LockService.using'));
        expect(error.message).toContain('LockService.using');
        expect(error.template).toBe('LockService.using');
      }
    });
  });

  describe('function form', () => {
    it('returns a string key or an array of keys, not encoded', () => {
      const one = compileKeySource((id: number) => `product:${id}`, purchase, WHERE);
      expect(one([42])).toEqual(['product:42']);
      const many = compileKeySource(
        (from: string, to: string) => [`account:${from}`, `account:${to}`] as const,
        transfer,
        'ProductService.transfer',
      );
      expect(many(['b', 'a'])).toEqual(['account:b', 'account:a']);
      const raw = compileKeySource(() => 'a:b c*', purchase, WHERE);
      expect(raw([])).toEqual(['a:b c*']);
    });

    it('calls the function with the arguments and this undefined', () => {
      const calls: { self: unknown; args: unknown[] }[] = [];
      const source = function (this: unknown, ...args: unknown[]) {
        calls.push({ self: this, args });
        return 'k';
      };
      compile(source)([1, 'two']);
      expect(calls).toEqual([{ self: undefined, args: [1, 'two'] }]);
    });

    it('returns a fresh array per call', () => {
      const keys = ['a', 'b'];
      const render = compile(() => keys);
      expect(render([])).toEqual(keys);
      expect(render([])).not.toBe(keys);
    });

    it.each<[string, unknown, string]>([
      ['undefined', undefined, 'returned undefined'],
      ['an empty string', '', 'got an empty string'],
      ['an empty array', [], 'returned an empty array'],
      ['an array with an empty key', ['a', ''], 'element 1'],
      ['an array with a number', ['a', 2], 'element 1'],
      ['a number', 42, 'returned 42'],
      ['an object', { key: 'a' }, 'returned an object'],
      ['a Promise', Promise.resolve('a'), 'must not be async'],
      ['a key over the limit', 'x'.repeat(MAX_KEY_BYTES + 1), '1025 UTF-8 bytes'],
    ])('rejects %s', (_, result, text) => {
      const error = keyError(() => compile(() => result as string)([]));
      expect(error.message).toContain(WHERE);
      expect(error.message).toContain(text);
      expect(error.template).toBe('fn');
    });

    it('wraps an error thrown by the function, keeping it as cause', () => {
      const boom = new TypeError("Cannot read properties of undefined (reading 'id')");
      const error = keyError(() =>
        compile(() => {
          throw boom;
        })([]),
      );
      expect(error.cause).toBe(boom);
      expect(error.message).toContain(WHERE);
      expect(error.message).toContain(boom.message);
      expect(error.template).toBe('fn');
    });

    it('does not read parameter names', () => {
      const wrapped = new Proxy(purchase, {});
      expect(compile((a: unknown) => String(a), wrapped)(['x'])).toEqual(['x']);
    });
  });

  describe('getParamNames', () => {
    it('reads plain functions and methods', () => {
      expect(names('function purchase(id, qty) { return id + qty; }')).toEqual({
        names: ['id', 'qty'],
        rest: false,
      });
      expect(names('function () {}')).toEqual({ names: [], rest: false });
      expect(getParamNames(purchase)).toEqual({ names: ['id', 'qty'], rest: false });
      expect(names('function* gen(a, b) { yield a; }').names).toEqual(['a', 'b']);
      const obj = js<Record<string, AnyFn>>(
        `{ purchase(id, qty) {}, *gen(a) {}, async(x) {}, get: function (y) {} }`,
      );
      expect(getParamNames(obj.purchase).names).toEqual(['id', 'qty']);
      expect(getParamNames(obj.gen).names).toEqual(['a']);
      expect(getParamNames(obj.async).names).toEqual(['x']); // a method named "async"
      expect(getParamNames(obj.get).names).toEqual(['y']);
    });

    it('reads async functions and methods', () => {
      expect(names('async function f(id, qty) { await id; }').names).toEqual(['id', 'qty']);
      const obj = js<Record<string, AnyFn>>(`{ async purchase(id, qty) {}, async *g(a) {} }`);
      expect(getParamNames(obj.purchase).names).toEqual(['id', 'qty']);
      expect(getParamNames(obj.g).names).toEqual(['a']);
      class Service {
        async purchase(id: number, qty: number) {
          return id + qty;
        }
      }
      expect(getParamNames(Service.prototype.purchase).names).toEqual(['id', 'qty']);
    });

    it('reads arrow functions', () => {
      expect(names('id => id').names).toEqual(['id']);
      expect(names('(id, qty) => id').names).toEqual(['id', 'qty']);
      expect(names('async id => id').names).toEqual(['id']);
      expect(names('async (id, qty) => id').names).toEqual(['id', 'qty']);
      expect(names('() => 1').names).toEqual([]);
      expect(names('(a = (b) => b * 2, c) => a(c)').names).toEqual(['a', 'c']);
    });

    it('skips default values containing parentheses, braces, strings and templates', () => {
      const source = `function f(
        a = Math.max(1, (2)),
        b = { x: [1, 2], y: { z: ')' } },
        c = 'it\\'s, (really) }',
        d = "a\\"b, c",
        e = \`\${a}, \${ { k: \`\${b}, )\` }.k }\`,
        f = [1, [2, 3]],
        g = x => (x, 1),
        h = function (p, q) { return p; },
        i = 10 / 2 / 5,
        j = /[),]\\/(,)/g,
        k
      ) {}`;
      expect(names(source).names).toEqual(['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k']);
    });

    it('skips comments', () => {
      const source = `function f(
        // first: (id, ignored)
        id, /* qty, ) } */ qty /* = 1 */ = 1, // trailing, comment)
        /** last */ last
      ) {}`;
      expect(names(source).names).toEqual(['id', 'qty', 'last']);
      expect(names('/* (x) */ function /* (y) */ f /* (z) */ (a) {}').names).toEqual(['a']);
    });

    it('reads quoted and computed method names', () => {
      const obj = js<Record<string | symbol, AnyFn>>(
        `{ 'odd (name)'(a) {}, ['comp' + '(x, y)'](b) {}, [Symbol.iterator](c) {}, 42(d) {} }`,
      );
      expect(getParamNames(obj['odd (name)']).names).toEqual(['a']);
      expect(getParamNames(obj['comp(x, y)']).names).toEqual(['b']);
      expect(getParamNames(obj[Symbol.iterator]).names).toEqual(['c']);
      expect(getParamNames(obj[42]).names).toEqual(['d']);
    });

    it('reports destructured parameters without a name', () => {
      expect(names('function f({ id, qty = (1) }, [a, b] = [], plain) {}')).toEqual({
        names: [undefined, undefined, 'plain'],
        rest: false,
      });
      expect(getParamNames(destructured)).toEqual({
        names: [undefined, undefined, 'plain'],
        rest: false,
      });
    });

    it('reports rest parameters', () => {
      expect(names('function f(a, ...args) {}')).toEqual({ names: ['a', 'args'], rest: true });
      expect(names('(...args) => args')).toEqual({ names: ['args'], rest: true });
      expect(names('function f(a, ...[b, c]) {}')).toEqual({ names: ['a', undefined], rest: true });
      expect(getParamNames(transfer)).toEqual({ names: ['from', 'to', 'rest'], rest: true });
    });

    it('reads non-ASCII and $/_ identifiers and a trailing comma', () => {
      expect(names('function f(ação, 名前, $id, _x,) {}').names).toEqual([
        'ação',
        '名前',
        '$id',
        '_x',
      ]);
    });

    it('reports an unnamed rest parameter when the source is not available', () => {
      const unknown = { names: [undefined], rest: true };
      expect(getParamNames(new Proxy(purchase, {}))).toEqual(unknown);
      expect(getParamNames(purchase.bind(null))).toEqual(unknown);
      expect(getParamNames(Math.max)).toEqual(unknown);
    });

    it('reports no parameters for a class', () => {
      expect(getParamNames(class {} as unknown as AnyFn)).toEqual({ names: [], rest: false });
    });
  });

  describe('methods compiled by TypeScript with legacy decorators', () => {
    const rendered: Record<string, KeyRenderer> = {};
    const params: Record<string, ReturnType<typeof getParamNames>> = {};

    /** A stand-in for @Locked: compiles at decoration time, like the real one. */
    const Keyed =
      (source: KeySource): MethodDecorator =>
      (target, key, descriptor) => {
        const where = `${target.constructor.name}.${String(key)}`;
        const method = descriptor.value as unknown as AnyFn;
        params[String(key)] = getParamNames(method);
        rendered[String(key)] = compileKeySource(source, method, where);
      };
    /** Another decorator wrapping the method, as @Transactional-style decorators do. */
    const Wrapping = (): MethodDecorator => (_target, _key, descriptor) => {
      const original = descriptor.value as unknown as (...args: unknown[]) => unknown;
      descriptor.value = function (this: unknown, ...args: unknown[]) {
        return original.apply(this, args);
      } as typeof descriptor.value;
    };
    const Body = (): ParameterDecorator => () => undefined;
    const Other = (): MethodDecorator => () => undefined;

    class OrderDto {
      customer!: { id: string };
      items!: { sku: string }[];
    }

    class OrderService {
      @Other()
      @Keyed('order:{dto.customer.id}:{dto.items.0.sku}')
      @Other()
      async create(@Body() dto: OrderDto, /* who */ user: string = 'anonymous', _opts = {}) {
        return [dto, user];
      }

      @Keyed(['account:{from}', 'account:{to}'])
      transfer(from: string, to: string, amount: number = Math.round((1 + 2) * 3)) {
        return [from, to, amount];
      }

      @Keyed('bulk:{0}:{ids.1}')
      bulk(first: string, ...ids: string[]) {
        return [first, ids];
      }

      @Keyed('job:{0.id}')
      @Wrapping()
      wrapped(job: { id: number }) {
        return job;
      }
    }

    it('reads the parameter names tsc emitted', () => {
      expect(OrderService.name).toBe('OrderService');
      expect(params.create).toEqual({ names: ['dto', 'user', '_opts'], rest: false });
      expect(params.transfer).toEqual({ names: ['from', 'to', 'amount'], rest: false });
      expect(params.bulk).toEqual({ names: ['first', 'ids'], rest: true });
      expect(params.wrapped).toEqual({ names: ['args'], rest: true });
    });

    it('renders keys from the decorated methods', () => {
      const dto = { customer: { id: 'c:1' }, items: [{ sku: 'A B' }] };
      expect(rendered.create([dto])).toEqual(['order:c%3A1:A%20B']);
      expect(rendered.transfer(['a', 'b', 5])).toEqual(['account:a', 'account:b']);
      expect(rendered.bulk(['f', 'x', 'y'])).toEqual(['bulk:f:y']);
      expect(rendered.wrapped([{ id: 3 }])).toEqual(['job:3']);
    });

    it('fails at decoration time for a placeholder the method does not have', () => {
      const error = keyError(() => {
        class Broken {
          @Keyed('order:{orderId}')
          cancel(id: string) {
            return id;
          }
        }
        return Broken;
      });
      expect(error.message).toContain('Broken.cancel');
      expect(error.message).toContain('(id)');
    });

    it('names the wrapper parameters when another decorator wrapped the method first', () => {
      const error = keyError(() => {
        class Wrapped {
          @Keyed('job:{job.id}')
          @Wrapping()
          run(job: { id: number }) {
            return job;
          }
        }
        return Wrapped;
      });
      expect(error.message).toContain('(...args)');
      expect(error.message).toContain('another decorator');
      expect(error.message).toContain('{0}');
    });
  });
});
