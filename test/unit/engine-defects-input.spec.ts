import 'reflect-metadata';
import type { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  LockConfigError,
  Locked,
  type LockedOptions,
  LockKeyError,
  RedlockModule,
  type RedlockModuleOptions,
} from '../../lib';
import { compileKeySource } from '../../lib/keys';

/**
 * Input validation defects found at 9fa1524 (no Redis needed): each test asserts the behaviour
 * the library should have, so it fails on that commit and passes once the defect is fixed.
 * Their engine-side halves (LockService calls on a live server) are in
 * test/integration/engine-defects.spec.ts.
 */

/** Nothing listens there: an app that gets past validation only logs connection errors. */
const NOWHERE = 'redis://127.0.0.1:1';

/** Builds and initialises an app with these module options; resolves with what it threw. */
async function startupError(options: RedlockModuleOptions): Promise<unknown> {
  let app: INestApplication | undefined;
  try {
    const moduleRef = await Test.createTestingModule({
      imports: [RedlockModule.forRoot(options)],
    }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
    return undefined;
  } catch (error) {
    return error;
  } finally {
    await app?.close();
  }
}

/** What a class decorated with `@Locked(template, options)` threw at decoration time. */
function decorationError(options: unknown): unknown {
  try {
    class Jobs {
      @Locked('job:{id}', options as LockedOptions)
      async run(id: string) {
        return id;
      }
    }
    void Jobs;
    return undefined;
  } catch (error) {
    return error;
  }
}

const describeError = (e: unknown): string =>
  e === undefined ? 'nothing thrown' : `${(e as Error).name}: ${(e as Error).message}`;

describe('defect 5: bad module clients are LockConfigError', () => {
  it('clients: null fails startup (it must not fall back to 127.0.0.1:6379)', async () => {
    const error = await startupError({ clients: null } as unknown as RedlockModuleOptions);
    expect(describeError(error)).toMatch(/^LockConfigError/);
    expect((error as LockConfigError).field).toBe('clients');
  });
});

describe('defect 10: unknown or malformed options are LockConfigError', () => {
  it.each([
    ['tll', 'ttl'],
    ['waitTimout', 'waitTimeout'],
    ['keyprefix', 'keyPrefix'],
  ])('module option %s fails startup, naming it and suggesting %s', async (unknown, suggestion) => {
    const error = await startupError({ clients: [NOWHERE], [unknown]: 1 } as RedlockModuleOptions);
    expect(describeError(error)).toMatch(/^LockConfigError/);
    expect((error as Error).message).toContain(unknown);
    expect((error as Error).message).toContain(suggestion);
  });

  it.each([
    ['waitTimout', 'waitTimeout'],
    ['tll', 'ttl'],
    ['onbusy', 'onBusy'],
  ])('@Locked option %s fails at decoration time, suggesting %s', (unknown, suggestion) => {
    const error = decorationError({ [unknown]: 0 });
    expect(describeError(error)).toMatch(/^LockConfigError/);
    expect((error as Error).message).toContain(unknown);
    expect((error as Error).message).toContain(suggestion);
  });

  it('@Locked(template, null) fails at decoration time with LockConfigError', () => {
    expect(describeError(decorationError(null))).toMatch(/^LockConfigError/);
  });

  it("clients: ['not a url'] fails startup with LockConfigError, not TypeError: Invalid URL", async () => {
    const error = await startupError({ clients: ['not a url'] });
    expect(describeError(error)).toMatch(/^LockConfigError/);
    expect((error as LockConfigError).field).toMatch(/^clients/);
  });
});

describe('defect 11: two argument lists never map to one key', () => {
  class Target {
    run(a: unknown, b: unknown, c: unknown) {
      return [a, b, c];
    }
  }
  const fn = Target.prototype.run;

  /** Deterministic PRNG (mulberry32), so a failure names a reproducible counterexample. */
  function prng(seed: number): () => number {
    let s = seed >>> 0;
    return () => {
      s = (s + 0x6d2b79f5) >>> 0;
      let t = s;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }

  /** Characters of random string values: separators, the escape character, digits, unicode. */
  const ALPHABET = [...'ab12-.:%_@/+| é', '😀'];
  /** Numbers whose text form holds separators too ('.', '-', 'e+'). */
  const NUMBERS = [0, 1, 2, 5, 12, -1, -2.5, 1.5, 5.2, 0.25, 1e21, 1e-7];

  function randomString(rand: () => number, chars: readonly string[], maxLength: number): string {
    const length = 1 + Math.floor(rand() * maxLength);
    let s = '';
    for (let i = 0; i < length; i++) s += chars[Math.floor(rand() * chars.length)];
    return s;
  }

  function randomValue(rand: () => number, chars: readonly string[], maxLength: number): unknown {
    const kind = rand();
    if (kind < 0.75) return randomString(rand, chars, maxLength);
    if (kind < 0.95) return NUMBERS[Math.floor(rand() * NUMBERS.length)];
    return rand() < 0.5 ? 7n : true;
  }

  /**
   * Argument lists for one template: short values over a small alphabet made of the template's
   * own literal characters plus a few others (dense, so that two lists differing only in where a
   * separator sits are both drawn), then longer values over the whole alphabet.
   */
  function tuplesFor(template: string, arity: number, seed: number): unknown[][] {
    const literal = template.replace(/\{[^}]*\}/g, '');
    const small = [...new Set([...'a1:%', ...literal])];
    const rand = prng(seed);
    const tuples: unknown[][] = [];
    for (let i = 0; i < 30_000; i++) {
      tuples.push(Array.from({ length: arity }, () => randomValue(rand, small, 3)));
    }
    for (let i = 0; i < 5_000; i++) {
      tuples.push(Array.from({ length: arity }, () => randomValue(rand, ALPHABET, 6)));
    }
    return tuples;
  }

  /**
   * Values meant to lock the same key: the documented equivalence of `42` and `'42'` (and of
   * other scalars with their text form). Anything else must render differently.
   */
  const canonical = (values: unknown[]): string => JSON.stringify(values.map((v) => String(v)));

  /** The first two argument lists (different once canonical) that render the same key. */
  function findCollision(template: string, arity: number, known: unknown[][]): string | undefined {
    let render: (args: readonly unknown[]) => string[];
    try {
      render = compileKeySource(template, fn, 'Target.run');
    } catch (error) {
      // Rejecting an ambiguous template at compile time is a fix too.
      if (error instanceof LockKeyError) return undefined;
      throw error;
    }
    const seen = new Map<string, { args: unknown[]; canon: string }>();
    const tuples = [...known, ...tuplesFor(template, arity, 0x5eed)];
    for (const args of tuples) {
      let key: string;
      try {
        [key] = render(args);
      } catch (error) {
        if (error instanceof LockKeyError) continue; // a value the template refuses
        throw error;
      }
      const canon = canonical(args);
      const before = seen.get(key);
      if (before && before.canon !== canon) {
        const show = (a: unknown[]) =>
          `(${a.map((v) => (typeof v === 'string' ? JSON.stringify(v) : String(v))).join(', ')})`;
        return `${show(before.args)} and ${show(args)} both render ${JSON.stringify(key)}`;
      }
      seen.set(key, { args, canon });
    }
    return undefined;
  }

  it.each<[string, number, unknown[][]]>([
    // Separators that are not encoded in values.
    [
      'x:{a}-{b}',
      2,
      [
        ['x-y', 'z'],
        ['x', 'y-z'],
      ],
    ],
    [
      'x:{a}.{b}',
      2,
      [
        [1.5, 2],
        [1, 5.2],
      ],
    ],
    ['{a}_{b}', 2, []],
    ['{a}@{b}/{c}', 3, []],
    ['{a}|{b}', 2, []],
    [
      '{a}-x-{b}',
      2,
      [
        ['a-x', 'b'],
        ['a', 'x-b'],
      ],
    ],
    // '%' is encoded in values, but as a separator it reads as the start of an escape.
    [
      '{a}%{b}',
      2,
      [
        ['x:', '3A'],
        ['x', '3A:'],
      ],
    ],
  ])('template %s renders distinct argument lists to distinct keys', (template, arity, known) => {
    expect(findCollision(template, arity, known)).toBeUndefined();
  });

  // Separated by characters that never appear unencoded in a value: injective today too. These
  // pass at 9fa1524; they check the property test itself (it must not flag a sound template).
  it.each<[string, number, unknown[][]]>([
    ['x:{a}:{b}', 2, []],
    ['{a}*{b}:{c}', 3, []],
  ])(
    'control: template %s renders distinct argument lists to distinct keys',
    (template, arity, known) => {
      expect(findCollision(template, arity, known)).toBeUndefined();
    },
  );
});
