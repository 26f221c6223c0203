import { Injectable, type INestApplication } from '@nestjs/common';
import { EventEmitterModule, OnEvent } from '@nestjs/event-emitter';
import { context, metrics, trace } from '@opentelemetry/api';
import type { Redis } from 'ioredis';
import {
  LOCK_METRICS,
  LOCK_NEST_EVENTS,
  type LockAcquiredEvent,
  LockBackendError,
  type LockBusyEvent,
  LockContext,
  Locked,
  type LockErrorEvent,
  type LockOrderEvent,
  type LockEventName,
  type LockLostEvent,
  LockNotAcquiredError,
  type LockReleasedEvent,
  LockService,
} from 'nest-locked';
import { LockEvents } from '../../lib/api/lock-events';
import {
  AlsContextManager,
  type FakeSpan,
  fakeMeterProvider,
  fakeTracerProvider,
  type Measurement,
} from '../support/fake-otel';
import { uid } from '../support/faults';
import {
  createLockApp,
  lockRedisKey,
  sleep,
  uniquePrefix,
  until,
  within,
} from '../support/lock-app';
import { redisForFile } from '../support/redis-for-file';
import type { RedisServerHandle } from '../support/redis-server';

jest.setTimeout(30_000);

let server: RedisServerHandle;
let redis: Redis;
redisForFile((s, r) => {
  server = s;
  redis = r;
});

@Injectable()
class ShopService {
  @Locked('product:{id}')
  async buy(id: string, holdMs = 0): Promise<number> {
    if (holdMs > 0) await sleep(holdMs);
    // Reentrant: the key is held by this context already, nothing is taken, nothing emitted.
    await this.check(id);
    return LockContext.current()!.fence;
  }

  @Locked('product:{0}')
  async check(_id: string): Promise<void> {}
}

/** Nest events, as an application would take them with @OnEvent. */
@Injectable()
class LockEventLog {
  readonly seen: [string, unknown][] = [];

  @OnEvent(LOCK_NEST_EVENTS.acquired)
  onAcquired(event: LockAcquiredEvent) {
    this.seen.push([LOCK_NEST_EVENTS.acquired, event]);
  }

  @OnEvent('nest-locked.busy')
  onBusy(event: LockBusyEvent) {
    this.seen.push(['nest-locked.busy', event]);
  }
}

/** Listens to every lock event of `locks` until `stop()`. */
function record(locks: LockService) {
  const seen: [LockEventName, unknown][] = [];
  const listeners = {
    acquired: (e: LockAcquiredEvent) => seen.push(['acquired', e]),
    released: (e: LockReleasedEvent) => seen.push(['released', e]),
    busy: (e: LockBusyEvent) => seen.push(['busy', e]),
    lost: (e: LockLostEvent) => seen.push(['lost', e]),
    error: (e: LockErrorEvent) => seen.push(['error', e]),
    lockOrder: (e: LockOrderEvent) => seen.push(['lockOrder', e]),
  };
  for (const [event, listener] of Object.entries(listeners)) {
    locks.on(event as 'acquired', listener as (e: LockAcquiredEvent) => void);
  }
  return {
    seen,
    of: <E extends LockEventName>(event: E) =>
      seen.filter(([e]) => e === event).map(([, payload]) => payload) as Parameters<
        (typeof listeners)[E]
      >[0][],
    stop: () => {
      for (const [event, listener] of Object.entries(listeners)) {
        locks.off(event as 'acquired', listener as (e: LockAcquiredEvent) => void);
      }
    },
  };
}

describe('lock events', () => {
  let app: INestApplication;
  let locks: LockService;
  let shop: ShopService;
  let log: LockEventLog;
  const keyPrefix = uniquePrefix('events');

  beforeAll(async () => {
    app = await createLockApp({
      options: {
        // `dead`: a port nothing listens on, for Redis failures.
        clients: { default: [server.url], dead: ['redis://127.0.0.1:1'] },
        keyPrefix,
        commandTimeout: 500,
      },
      imports: [EventEmitterModule.forRoot()],
      providers: [ShopService, LockEventLog],
    });
    locks = app.get(LockService);
    shop = app.get(ShopService);
    log = app.get(LockEventLog);
  });
  afterAll(async () => {
    await app?.close();
  });

  it('emits acquired then released, once per lock taken, with keys, group, fence, wait and hold times', async () => {
    const events = record(locks);
    try {
      const p = uid();
      const fence = await shop.buy(p, 50);
      expect(events.seen.map(([e]) => e)).toEqual(['acquired', 'released']);
      const [acquired] = events.of('acquired');
      expect(acquired).toEqual({
        keys: [`product:${p}`],
        client: 'default',
        fence,
        waitedMs: expect.any(Number),
      });
      expect(acquired.waitedMs).toBeGreaterThanOrEqual(0);
      const [released] = events.of('released');
      expect(released).toEqual({
        keys: [`product:${p}`],
        client: 'default',
        fence,
        heldMs: expect.any(Number),
      });
      // Held across a 50 ms sleep (Date.now() granularity: a ms or two less at worst).
      expect(released.heldMs).toBeGreaterThanOrEqual(45);
    } finally {
      events.stop();
    }
  });

  it('emits busy when a call gives up, with onBusy: skip too, and the wait it made', async () => {
    const events = record(locks);
    const key = `product:${uid()}`;
    const handle = await locks.acquire(key);
    try {
      await expect(locks.using(key, () => 'never', { waitTimeout: 100 })).rejects.toBeInstanceOf(
        LockNotAcquiredError,
      );
      await expect(
        locks.using(key, () => 'never', { waitTimeout: 0, onBusy: 'skip' }),
      ).resolves.toBeUndefined();
      const busy = events.of('busy');
      expect(busy).toEqual([
        { keys: [key], client: 'default', waitedMs: expect.any(Number) },
        { keys: [key], client: 'default', waitedMs: expect.any(Number) },
      ]);
      // It waited for its waitTimeout before giving up.
      expect(busy[0].waitedMs).toBeGreaterThanOrEqual(95);
    } finally {
      await handle.release();
      events.stop();
    }
  });

  it('emits lost with the fence and the LockLostError when the key vanishes under its holder', async () => {
    const events = record(locks);
    const key = `product:${uid()}`;
    const handle = await locks.acquire(key, { ttl: 600 });
    try {
      expect(await redis.del(lockRedisKey(keyPrefix, key))).toBe(1);
      // The next renewal (every ttl / 3) finds the key gone.
      await within(
        new Promise<void>((resolve) => handle.signal.addEventListener('abort', () => resolve())),
        5_000,
        'the lost signal',
      );
      const [lost] = events.of('lost');
      expect(lost).toEqual({
        keys: [key],
        client: 'default',
        fence: handle.fence,
        error: handle.signal.reason,
      });
      expect(lost.error.reason).toBe('lost');
    } finally {
      await handle.release();
      events.stop();
    }
    // The holder still lets go: released follows, so acquired and released stay paired.
    expect(events.of('released')).toEqual([
      { keys: [key], client: 'default', fence: handle.fence, heldMs: expect.any(Number) },
    ]);
  });

  it('emits error with the LockBackendError the call got when Redis fails an acquire', async () => {
    const events = record(locks);
    try {
      const failure = await locks
        .using('product:1', () => 'never', { client: 'dead' })
        .catch((err: unknown) => err);
      expect(failure).toBeInstanceOf(LockBackendError);
      expect(events.seen).toEqual([
        ['error', { keys: ['product:1'], client: 'dead', operation: 'acquire', error: failure }],
      ]);
    } finally {
      events.stop();
    }
  });

  it('emits them as Nest events nest-locked.<name> to @OnEvent handlers (EventEmitterModule present)', async () => {
    log.seen.length = 0;
    const p = uid();
    const fence = await shop.buy(p);
    const key = `product:${p}`;
    const handle = await locks.acquire(key);
    await locks.using(key, () => 'never', { waitTimeout: 0, onBusy: 'skip' });
    await handle.release();
    expect(log.seen).toEqual([
      [
        'nest-locked.acquired',
        { keys: [key], client: 'default', fence, waitedMs: expect.any(Number) },
      ],
      ['nest-locked.acquired', expect.objectContaining({ keys: [key], fence: handle.fence })],
      ['nest-locked.busy', { keys: [key], client: 'default', waitedMs: expect.any(Number) }],
    ]);
  });

  it('keeps the lock call going when a listener throws', async () => {
    const throwing = () => {
      throw new Error('listener bug');
    };
    locks.on('acquired', throwing);
    try {
      await expect(shop.buy(uid())).resolves.toEqual(expect.any(Number));
    } finally {
      locks.off('acquired', throwing);
    }
  });

  // Last: it stops the server.
  it('emits error (operation release) and still released when the release cannot reach Redis', async () => {
    const events = record(locks);
    const key = `product:${uid()}`;
    const handle = await locks.acquire(key, { watchdog: false });
    try {
      server.kill();
      await until(() => server.pid === undefined, 'redis-server gone');
      await handle.release();
      const [error] = events.of('error');
      expect(error).toMatchObject({ keys: [key], client: 'default', operation: 'release' });
      expect(error.error).toBeInstanceOf(LockBackendError);
      expect(events.of('released')).toEqual([
        { keys: [key], client: 'default', fence: handle.fence, heldMs: expect.any(Number) },
      ]);
    } finally {
      events.stop();
      await server.restart();
    }
  });
});

describe('nobody listening', () => {
  let app: INestApplication;
  let shop: ShopService;

  beforeAll(async () => {
    // No EventEmitterModule, no OpenTelemetry provider, no listener.
    app = await createLockApp({
      options: { clients: [server.url], keyPrefix: uniquePrefix('quiet') },
      providers: [ShopService],
    });
    shop = app.get(ShopService);
  });
  afterAll(async () => {
    await app?.close();
  });

  it('costs a flag read per emission point: nothing asked, built or emitted', async () => {
    const wants = jest.spyOn(LockEvents.prototype, 'wants');
    const emit = jest.spyOn(LockEvents.prototype, 'emit');
    const refused = jest.spyOn(LockEvents.prototype, 'refused');
    try {
      const locks = app.get(LockService);
      await shop.buy(uid());
      const key = `product:${uid()}`;
      const handle = await locks.acquire(key);
      await locks.using(key, () => 'never', { waitTimeout: 0, onBusy: 'skip' });
      await handle.release();
      expect(wants).not.toHaveBeenCalled();
      expect(emit).not.toHaveBeenCalled();
      // A refusal reaches the hub only on the error path, where it returns at its flags.
      expect(refused).toHaveBeenCalledTimes(1);
    } finally {
      wants.mockRestore();
      emit.mockRestore();
      refused.mockRestore();
    }
  });
});

describe('OpenTelemetry through a real locked call', () => {
  let app: INestApplication;
  let shop: ShopService;
  let locks: LockService;
  const measurements: Measurement[] = [];
  const spans: FakeSpan[] = [];

  beforeAll(async () => {
    // As an application does: the SDK is registered before the Nest app is created.
    context.setGlobalContextManager(new AlsContextManager());
    metrics.setGlobalMeterProvider(fakeMeterProvider(measurements));
    trace.setGlobalTracerProvider(fakeTracerProvider(spans));
    app = await createLockApp({
      options: { clients: [server.url], keyPrefix: uniquePrefix('otel') },
      providers: [ShopService],
    });
    shop = app.get(ShopService);
    locks = app.get(LockService);
  });
  afterAll(async () => {
    await app?.close();
    metrics.disable();
    trace.disable();
    context.disable();
  });

  it('wraps each locked call in a span and records its wait, hold and outcome', async () => {
    const p = uid();
    const fence = await shop.buy(p, 20);
    // The reentrant inner call (check) gets a span of its own, inside the first, taking nothing.
    expect(spans.map((s) => s.name)).toEqual([
      'nest-locked ShopService.buy',
      'nest-locked ShopService.check',
    ]);
    expect(spans[0]).toMatchObject({
      ended: true,
      attributes: {
        'lock.client': 'default',
        'lock.keys': [`product:${p}`],
        'lock.result': 'acquired',
        'lock.fence': fence,
      },
    });
    expect(spans[1].attributes).toEqual({
      'lock.client': 'default',
      'lock.keys': [`product:${p}`],
    });
    const instruments = measurements.map((m) => [m.instrument, m.attributes]);
    expect(instruments).toEqual([
      [LOCK_METRICS.acquires, { 'lock.client': 'default', 'lock.result': 'acquired' }],
      [LOCK_METRICS.waitDuration, { 'lock.client': 'default', 'lock.result': 'acquired' }],
      [LOCK_METRICS.holdDuration, { 'lock.client': 'default' }],
    ]);
    expect(measurements[2].value).toBeGreaterThanOrEqual(15);
  });

  it('names a LockService.using span after the method and counts a busy outcome', async () => {
    spans.length = 0;
    measurements.length = 0;
    const key = `product:${uid()}`;
    const handle = await locks.acquire(key);
    await expect(locks.using(key, () => 'never', { waitTimeout: 0 })).rejects.toBeInstanceOf(
      LockNotAcquiredError,
    );
    await handle.release();
    expect(spans.map((s) => [s.name, s.attributes['lock.result'], s.status?.code])).toEqual([
      ['nest-locked LockService.using', 'busy', 2],
    ]);
    expect(measurements.map((m) => m.attributes?.['lock.result'])).toEqual(
      expect.arrayContaining(['acquired', 'busy']),
    );
  });
});
