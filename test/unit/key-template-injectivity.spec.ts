import { sliceKey } from '../../lib/api/segmented.strategy';
import { compileKeySource, type KeyRenderer, type KeySource } from '../../lib/keys/key-source';
import { keyError } from '../support/key-error';

class Service {
  run(a: unknown, b: unknown, c: unknown) {
    return [a, b, c];
  }
}
const { run } = Service.prototype;
const compile = (source: KeySource): KeyRenderer => compileKeySource(source, run, 'Service.run');

/** mulberry32: a small seeded generator, so a failure replays exactly. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

/** Mostly separators and digits, so that values often contain what a template separates with. */
const COMMON = ['-', '.', ':', '%', '_', '/', '0', '1', '2', '5', 'e', 'A'];
const RARE = ['a', 'x', 'Z', ' ', '{', '}', 'é', '€', '😀', '\ud800', '+'];
const NUMBERS = [1, 2, 5, 12, 15, 25, 52, 1.5, 5.2, 0.5, 2.5, -1, -1.5, 1e21, 1e-7];
const BIGINTS = [1n, 2n, 15n, -2n, 12345678901234567890n];

/**
 * A random key value: sometimes a number, bigint or boolean, mostly a short string. Half of its
 * characters are the template's own literal characters (`favoured`), which is where collisions
 * would come from.
 */
function valueFrom(next: () => number, favoured: readonly string[]): unknown {
  const pick = <T>(list: readonly T[]): T => list[Math.floor(next() * list.length)];
  const kind = next();
  if (kind < 0.15) return pick(NUMBERS);
  if (kind < 0.2) return pick(BIGINTS);
  if (kind < 0.23) return next() < 0.5;
  let text = '';
  const length = 1 + Math.floor(next() * 3);
  for (let i = 0; i < length; i++) {
    const draw = next();
    text += pick(draw < 0.5 ? favoured : draw < 0.85 ? COMMON : RARE);
  }
  return text;
}

/**
 * What a tuple means as a lock: its values' text. A number and its decimal string are the same
 * resource on purpose (a route param and a parsed body field agree), so they count as equal.
 */
const meaning = (values: readonly unknown[]) => JSON.stringify(values.map((v) => String(v)));

/**
 * Renders 4000 random tuples of `arity` values and fails on two distinct tuples that share a
 * key. `toArgs` places the values in the call's arguments (a property path reads them there).
 */
function checkInjective(
  source: KeySource,
  arity: number,
  seed: number,
  toArgs: (values: unknown[]) => unknown[] = (values) => values,
): number {
  const render = compile(source);
  const next = random(seed);
  const seen = new Map<string, string>();
  const templates = typeof source === 'string' ? [source] : (source as readonly string[]);
  const favoured = [...new Set(templates.join('').replace(/\{[\w.]+\}/g, ''))];
  const colons = (text: string) => text.split(':').length - 1;
  for (let n = 0; n < 4000; n++) {
    const values = Array.from({ length: arity }, () => valueFrom(next, favoured));
    const keys = render(toArgs(values));
    const key = JSON.stringify(keys);
    const mine = meaning(values);
    const owner = seen.get(key) ?? mine;
    if (owner !== mine) throw new Error(`${owner} and ${mine} both render ${key}`);
    seen.set(key, mine);
    // Equal tuples, equal keys: the same values again, and numbers given as their text.
    const asText = values.map((v) => (typeof v === 'number' ? String(v) : v));
    for (const again of [render(toArgs(values)), render(toArgs(asText))]) {
      if (JSON.stringify(again) !== key) throw new Error(`${mine} rendered ${key}, then again`);
    }
    // No value adds a ':', so no value can forge the `:seg:N` suffix of a slice.
    keys.forEach((k, i) => {
      if (colons(k) !== colons(templates[i])) throw new Error(`${mine} added a ":" to ${k}`);
    });
  }
  return seen.size;
}

describe('key templates render distinct argument lists as distinct keys', () => {
  it("keeps ('x-y', 'z') and ('x', 'y-z') apart in x:{a}-{b}", () => {
    const render = compile('x:{a}-{b}');
    expect(render(['x-y', 'z'])).not.toEqual(render(['x', 'y-z']));
  });

  it('keeps (1.5, 2) and (1, 5.2) apart in x:{a}.{b}', () => {
    const render = compile('x:{a}.{b}');
    expect(render([1.5, 2])).not.toEqual(render([1, 5.2]));
    expect(render(['1.5', '2'])).toEqual(render([1.5, 2])); // a number is its decimal text
  });

  it('encodes, in a value, only the character that starts the text after its placeholder', () => {
    expect(compile('x:{a}-{b}')(['p-q', 'r-s'])).toEqual(['x:p%2Dq-r-s']);
    expect(compile('x:{a}.{b}')([1.5, 5.2])).toEqual(['x:1%2E5.5.2']);
    expect(compile('{a}-x{b}.')(['x-y', 'v.w'])).toEqual(['x%2Dy-xv.w.']);
    expect(compile('v{a}1{b}')([11, 21n])).toEqual(['v%31%31121']);
  });

  it('renders single-placeholder and ":"-separated templates as before', () => {
    expect(compile('x:{a}')(['p-q.r_s/t'])).toEqual(['x:p-q.r_s/t']);
    expect(compile('k:{a}:{b}')(['a-b', 'c.d'])).toEqual(['k:a-b:c.d']);
    expect(compile('k:{a}:{b}')([1.5, -2n])).toEqual(['k:1.5:-2']);
  });

  it('rejects a placeholder followed by "%", which encoded values contain', () => {
    // ('x%', '3Ax') and ('x', '25:x') would both give "x%25%3Ax".
    const error = keyError(() => compile('{a}%{b}'));
    expect(error.placeholder).toBe('a');
    expect(error.message).toContain('"%"');
    expect(compile('rate:{a}%')([5])).toEqual(['rate:5%']);
  });

  it('keeps a value from forging the slice suffix of a segmented key', () => {
    const render = compile('stock:{a}');
    expect(render(['1:seg:2'])).not.toEqual([sliceKey(render(['1'])[0], 2)]);
  });

  it.each<[KeySource, number, number]>([
    ['x:{a}-{b}', 2, 1],
    ['x:{a}.{b}', 2, 2],
    ['k:{a}:{b}', 2, 3],
    ['{a}_{b}/{c}', 3, 4],
    ['{a}-x{b}.', 2, 5],
    ['v{a}1{b}', 2, 6],
    ['{a}A{b}', 2, 7], // "A" is also a hex digit of escapes such as %3A
    ['{a}e{b}e{c}', 3, 8], // "e" is in numbers such as 1e+21
    ['{a} {b}', 2, 9],
    ['{a}é{b}', 2, 10],
    ['{a}{{{b}}}{c}', 3, 11],
    [['x:{a}-{b}', 'y:{c}'], 3, 12],
  ])(
    '%j: of thousands of random tuples, no two distinct ones share a key',
    (source, arity, seed) => {
      expect(checkInjective(source, arity, seed)).toBeGreaterThan(1000);
    },
  );

  it('holds for values read through property paths', () => {
    const toArgs = ([a, b]: unknown[]) => [{ a, b }];
    expect(checkInjective('p/{0.a}-{0.b}', 2, 13, toArgs)).toBeGreaterThan(1000);
  });
});
