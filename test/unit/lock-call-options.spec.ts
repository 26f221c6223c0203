import 'reflect-metadata';
import { LockConfigError, Locked, LockService, type LockCallOptions } from '../../lib';
import { resolveRedlockOptions } from '../../lib/options/redlock-options';

/**
 * Per-call options of `@Locked` and `LockService.using` / `acquire`, validated before anything
 * is locked. The registry is a stub: a call whose options pass reaches it and stops there, so
 * no Redis is needed.
 */
const REACHED = new Error('the options passed validation and the call reached the lock engine');
const registry = {
  names: ['default'],
  has: () => true,
  get: () => {
    throw REACHED;
  },
};
const service = new LockService(
  resolveRedlockOptions({ clients: ['redis://127.0.0.1:1'] }),
  registry as never,
);

async function rejection(call: () => Promise<unknown>): Promise<unknown> {
  try {
    await call();
  } catch (e) {
    return e;
  }
  return undefined;
}

const using = (options: unknown) => rejection(() => service.using('k', () => 1, options as never));
const acquire = (options: unknown) => rejection(() => service.acquire('k', options as never));
function decorate(options: unknown): unknown {
  try {
    class Target {
      @Locked('k:{id}', options as never)
      async m(id: string) {
        return id;
      }
    }
    void Target;
  } catch (e) {
    return e;
  }
  return undefined;
}

function expectConfigError(error: unknown, field: string, message: string | RegExp) {
  expect(error).toBeInstanceOf(LockConfigError);
  expect((error as LockConfigError).field).toBe(field);
  if (typeof message === 'string') expect((error as Error).message).toBe(message);
  else expect((error as Error).message).toMatch(message);
}

describe('unknown per-call option keys', () => {
  it('LockService.using names the key and the nearest valid one', async () => {
    expectConfigError(
      await using({ waitTimout: 100 }),
      'LockService.using options.waitTimout',
      'Unknown option "waitTimout" in LockService.using options; did you mean "waitTimeout"?',
    );
  });

  it('LockService.acquire too', async () => {
    expectConfigError(
      await acquire({ tll: 5_000 }),
      'LockService.acquire options.tll',
      'Unknown option "tll" in LockService.acquire options; did you mean "ttl"?',
    );
  });

  it('@Locked fails at decoration time', () => {
    expectConfigError(
      decorate({ waitTimout: 100 }),
      '@Locked on Target.m.waitTimout',
      'Unknown option "waitTimout" in the options of @Locked on Target.m; did you mean "waitTimeout"?',
    );
  });

  it('suggests across case differences', async () => {
    expectConfigError(
      await using({ WaitTimeout: 1 }),
      'LockService.using options.WaitTimeout',
      /did you mean "waitTimeout"\?/,
    );
    expectConfigError(
      decorate({ maxhold: 1 }),
      '@Locked on Target.m.maxhold',
      /did you mean "maxHold"\?/,
    );
  });

  it('lists the valid keys when none is near', async () => {
    const error = await using({ colour: 'red' });
    expectConfigError(
      error,
      'LockService.using options.colour',
      /^Unknown option "colour" in LockService\.using options; valid options are "client", "ttl", "watchdog", "maxHold", "waitTimeout", "replicaAcks", "replicaAckTimeout", "segments", "onBusy", "minHold", "mode", "permits", "lockClass", "nestedInOrder", "signal"\.$/,
    );
  });

  it('a key that is undefined is still a typo', () => {
    expect(decorate({ tll: undefined })).toBeInstanceOf(LockConfigError);
  });

  it('says where a module option goes', async () => {
    expectConfigError(
      await using({ keyPrefix: 'x:' }),
      'LockService.using options.keyPrefix',
      /"keyPrefix" is a module option.*RedlockModule\.forRoot/,
    );
  });

  it('accepts every documented key', async () => {
    const options = {
      client: 'default',
      ttl: 1_000,
      watchdog: false,
      maxHold: 5_000,
      waitTimeout: 0,
      segments: 2,
      onBusy: 'skip',
      minHold: 1_000,
      replicaAcks: 0,
      replicaAckTimeout: 500,
      mode: 'write',
      permits: 1,
      lockClass: 'order:{id}',
      nestedInOrder: true,
      signal: new AbortController().signal,
    } satisfies Required<LockCallOptions>;
    expect(await using(options)).toBe(REACHED);
    const { segments: _s, ...forAcquire } = options;
    expect(await acquire(forAcquire)).toBe(REACHED);
    const { signal: _signal, ...forDecorator } = options;
    expect(decorate(forDecorator)).toBeUndefined();
  });
});

describe('signal', () => {
  it('is taken by LockService.using and acquire', async () => {
    const signal = new AbortController().signal;
    expect(await using({ signal })).toBe(REACHED);
    expect(await acquire({ signal })).toBe(REACHED);
  });

  it.each([
    ['an object that looks like a signal', { aborted: false, addEventListener: () => undefined }],
    ['an AbortController', new AbortController()],
    ['null', null],
    ['a string', 'abort'],
  ])('rejects %s', async (_label, signal) => {
    expectConfigError(
      await using({ signal }),
      'LockService.using options.signal',
      /expected an AbortSignal/,
    );
    expectConfigError(
      await acquire({ signal }),
      'LockService.acquire options.signal',
      /expected an AbortSignal/,
    );
  });

  it('is refused by @Locked, whose options are fixed at decoration time', () => {
    expectConfigError(
      decorate({ signal: new AbortController().signal }),
      '@Locked on Target.m.signal',
      /"signal" .*@Locked on Target\.m.*LockService\.using\(keys, fn, \{ signal \}\)/,
    );
  });
});

describe('options that are not an object', () => {
  it.each([
    ['null', null],
    ['a number', 5],
    ['a string', 'ttl'],
    ['an array', [{ ttl: 1 }]],
    ['a function', () => ({ ttl: 1 })],
  ])('%s is a LockConfigError, not a TypeError', async (_label, options) => {
    expectConfigError(
      await using(options),
      'LockService.using options',
      /^LockService\.using options must be an object/,
    );
    expectConfigError(
      await acquire(options),
      'LockService.acquire options',
      /^LockService\.acquire options must be an object/,
    );
    expectConfigError(
      decorate(options),
      '@Locked on Target.m',
      /^The options of @Locked on Target\.m must be an object/,
    );
  });

  it('leaving them out is fine', async () => {
    expect(await rejection(() => service.using('k', () => 1))).toBe(REACHED);
    expect(await rejection(() => service.acquire('k'))).toBe(REACHED);
    expect(await using(undefined)).toBe(REACHED);
  });
});

describe('durations are capped at the longest Node.js timer (2^31-1 ms)', () => {
  const MAX = 2 ** 31 - 1;

  it.each(['ttl', 'waitTimeout', 'maxHold'])('%s: 2^31-1 passes, 2^31 is refused', async (key) => {
    expect(await using({ [key]: MAX })).toBe(REACHED);
    const error = await using({ [key]: MAX + 1 });
    expectConfigError(error, `LockService.using options.${key}`, /2147483647/);
    expect((error as Error).message).toContain('got 2147483648');
    expectConfigError(decorate({ [key]: 2 ** 40 }), `@Locked on Target.m.${key}`, /2147483647/);
  });

  it('maxHold stays unbounded with Infinity', async () => {
    expect(await using({ maxHold: Infinity })).toBe(REACHED);
  });

  it.each([-1, NaN, Infinity, 2 ** 31, '1000', null])('minHold %p is refused', async (v) => {
    expectConfigError(await using({ minHold: v }), 'LockService.using options.minHold', /minHold/);
    expectConfigError(decorate({ minHold: v }), '@Locked on Target.m.minHold', /from 0 \(off\)/);
  });

  it('minHold takes 0 (off) up to 2^31-1 ms', async () => {
    for (const v of [0, 0.5, 1_000, MAX]) expect(await using({ minHold: v })).toBe(REACHED);
  });

  it('waitTimeout Infinity is refused (it would give up at once after the overflow)', async () => {
    expect(await using({ waitTimeout: Infinity })).toBeInstanceOf(LockConfigError);
  });
});

describe('mode and permits (shared holds)', () => {
  it.each([['read'], ['write']])('accepts mode %s', async (mode) => {
    expect(await using({ mode })).toBe(REACHED);
    expect(await acquire({ mode })).toBe(REACHED);
    expect(decorate({ mode })).toBeUndefined();
  });

  it.each([['READ'], [''], [1], [null], ['shared']])('refuses mode %p', async (mode) => {
    expectConfigError(
      await using({ mode }),
      'LockService.using options.mode',
      /"LockService\.using options\.mode": got .*expected 'read' or 'write'/,
    );
    expectConfigError(decorate({ mode }), '@Locked on Target.m.mode', /expected 'read' or 'write'/);
  });

  it.each([[1], [5], [1_000]])('accepts permits %p', async (permits) => {
    expect(await using({ permits })).toBe(REACHED);
    expect(decorate({ permits })).toBeUndefined();
  });

  it.each([[0], [-1], [1.5], [Number.NaN], [Infinity], ['5'], [null]])(
    'refuses permits %p',
    async (permits) => {
      expectConfigError(
        await acquire({ permits }),
        'LockService.acquire options.permits',
        /options\.permits": got .*expected an integer >= 1/,
      );
      expectConfigError(decorate({ permits }), '@Locked on Target.m.permits', /integer >= 1/);
    },
  );

  it("refuses mode: 'read' or permits with segments at decoration", () => {
    expectConfigError(
      decorate({ mode: 'read', segments: 4 }),
      '@Locked on Target.m.mode',
      /mode: 'read' cannot be combined with "segments"/,
    );
    expectConfigError(
      decorate({ permits: 3, segments: 4 }),
      '@Locked on Target.m.permits',
      /"permits" cannot be combined with "segments"/,
    );
    // The default, spelt out, is the exclusive lock a slice is anyway.
    expect(decorate({ mode: 'write', permits: 1, segments: 4 })).toBeUndefined();
  });

  it("refuses permits > 1 with mode: 'read'", async () => {
    expectConfigError(
      await using({ mode: 'read', permits: 3 }),
      'LockService.using options.permits',
      /permits: 3 with mode: 'read'/,
    );
    expect(await using({ mode: 'read', permits: 1 })).toBe(REACHED);
  });
});
