import 'reflect-metadata';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Body, Controller, Injectable, type INestApplication, Param, Post } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import { Redis } from 'ioredis';
import Redlock from 'redlock';
import request from 'supertest';
import {
  InjectRedlock,
  LockBackendError,
  LockConfigError,
  LockContext,
  type LockContextInfo,
  Locked,
  type LockLostEvent,
  LockLostError,
  LockNotAcquiredError,
  LockService,
} from 'nest-locked';
import { RedlockTestingController, RedlockTestingModule } from 'nest-locked/testing';
import { type Observable, Subject } from 'rxjs';
import { LockGroupRegistry } from '../../lib/module/lock-group.registry';
import { FIRST_BUSY_RETRY_MS } from '../../lib/api/hold-times';

/**
 * `nest-locked/testing`: the real decorator, context, service and interceptor over the
 * in-memory backend, as a user's unit test uses them. No Redis anywhere (a connection attempt
 * would fail the `connect` spy below).
 */

const connect = jest.spyOn(Redis.prototype, 'connect');
afterAll(() => expect(connect).not.toHaveBeenCalled());

/** Lets the event loop turn until `check` holds (polling: no timing assumption). */
async function until(check: () => boolean, what: string, ms = 5_000): Promise<void> {
  const end = performance.now() + ms;
  while (!check()) {
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(2);
  }
}

/** A promise and its resolver, to hold a locked call open for as long as a test needs. */
function gate(): { open: () => void; opened: Promise<void> } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { open, opened };
}

// The lock templates read these methods' parameters by name; some bodies do not.
/* eslint-disable @typescript-eslint/no-unused-vars */
@Injectable()
class Shop {
  stock = new Map<number, number>([[1, 100]]);
  /** [entered, left] of every purchase, to check that none overlap. */
  readonly intervals: [number, number][] = [];
  readonly seen: LockContextInfo[] = [];
  /** When set, a purchase waits on it (held open by the test). */
  hold?: Promise<void>;

  @Locked('product:{id}')
  async purchase(id: number, qty: number): Promise<number> {
    const entered = performance.now();
    this.seen.push(LockContext.current()!);
    const stock = this.stock.get(id) ?? 0; // read ...
    await (this.hold ?? sleep(1)); // ... yield (another caller would interleave here) ...
    this.stock.set(id, stock - qty); // ... write
    this.intervals.push([entered, performance.now()]);
    return LockContext.current()!.fence;
  }

  @Locked('product:{id}', { waitTimeout: 0 })
  async tryPurchase(id: number): Promise<LockContextInfo> {
    await (this.hold ?? Promise.resolve());
    return LockContext.current()!;
  }

  @Locked('product:{id}', { waitTimeout: 0, onBusy: 'skip' })
  async restock(id: number): Promise<string | undefined> {
    return `restocked ${id}`;
  }

  /** Reentrant: a locked call that calls another locked method on the same key. */
  @Locked('product:{id}', { waitTimeout: 0 })
  async purchaseTwice(id: number): Promise<[LockContextInfo, LockContextInfo]> {
    const outer = LockContext.current()!;
    await (this.hold ?? Promise.resolve());
    const inner = await this.tryPurchase(id);
    return [outer, inner];
  }

  @Locked(['account:{from}', 'account:{to}'], { waitTimeout: 2_000 })
  async transfer(from: string, to: string): Promise<LockContextInfo> {
    await (this.hold ?? sleep(1));
    return LockContext.current()!;
  }

  @Locked('stock:{sku}', { segments: 3, waitTimeout: 2_000 })
  async takeSlice(sku: string): Promise<number> {
    await (this.hold ?? sleep(1));
    return LockContext.current()!.segment!;
  }

  @Locked('report:{id}', { ttl: 60, watchdog: false, waitTimeout: 0 })
  async unrenewed(id: string): Promise<AbortSignal> {
    const { signal } = LockContext.current()!;
    await (this.hold ?? Promise.resolve());
    return signal;
  }

  @Locked('report:{id}', { ttl: 400, waitTimeout: 0 })
  async renewed(id: string): Promise<AbortSignal> {
    const { signal } = LockContext.current()!;
    await (this.hold ?? Promise.resolve());
    return signal;
  }

  @Locked('audit:{id}', { client: 'orders', waitTimeout: 0 })
  async audit(id: string): Promise<string> {
    return LockContext.current()!.keys[0];
  }

  @Locked('stream:{id}')
  stream(id: string, values: Subject<number>): Observable<number> {
    return values.asObservable();
  }

  @Locked('boom:{id}')
  boom(id: string): Promise<void> {
    throw new Error('boom');
  }
}
/* eslint-enable @typescript-eslint/no-unused-vars */

describe('RedlockTestingModule', () => {
  let moduleRef: TestingModule;
  let shop: Shop;
  let locks: LockService;
  let controls: RedlockTestingController;

  beforeAll(async () => {
    moduleRef = await Test.createTestingModule({
      imports: [
        RedlockTestingModule.forRoot({ waitTimeout: 2_000, groups: ['default', 'orders'] }),
      ],
      providers: [Shop],
    }).compile();
    await moduleRef.init();
    shop = moduleRef.get(Shop);
    locks = moduleRef.get(LockService);
    controls = moduleRef.get(RedlockTestingController);
  });
  afterAll(() => moduleRef.close());
  afterEach(() => {
    controls.reset();
    shop.hold = undefined;
    shop.intervals.length = 0;
    shop.seen.length = 0;
  });

  describe('semantics of the engine', () => {
    it('holds the lock of an Observable until it completes; a method that throws at once releases', async () => {
      const values = new Subject<number>();
      const stream = (await shop.stream('s', values)) as unknown as Observable<number>;
      const seen: number[] = [];
      const completed = new Promise<void>((resolve) =>
        stream.subscribe({ next: (v) => seen.push(v), complete: resolve }),
      );
      values.next(1);
      expect(await locks.isLocked('stream:s')).toBe(true);
      values.complete();
      // Completion reaches the subscriber once the lock is released.
      await completed;
      expect(seen).toEqual([1]);
      expect(await locks.isLocked('stream:s')).toBe(false);

      await expect(shop.boom('b')).rejects.toThrow('boom');
      expect(await locks.isLocked('boom:b')).toBe(false);
    });

    it('serializes concurrent calls on one key: no overlap, the read-check-write ends right', async () => {
      shop.stock.set(1, 100);
      await Promise.all(Array.from({ length: 20 }, () => shop.purchase(1, 1)));
      expect(shop.stock.get(1)).toBe(80);
      const sorted = [...shop.intervals].sort((a, b) => a[0] - b[0]);
      for (let i = 1; i < sorted.length; i++) {
        expect(sorted[i][0]).toBeGreaterThanOrEqual(sorted[i - 1][1]);
      }
    });

    it('renders the template and runs the method inside LockContext (undefined outside)', async () => {
      expect(LockContext.current()).toBeUndefined();
      await shop.purchase(1, 0);
      const [info] = shop.seen;
      expect(info.keys).toEqual(['product:1']);
      expect(info.fences).toEqual({ 'product:1': info.fence });
      expect(info.signal.aborted).toBe(false);
      expect(info.waitedMs).toBeGreaterThanOrEqual(0);
      expect(LockContext.current()).toBeUndefined();
    });

    it('gives fences that increase strictly per key', async () => {
      const fences: number[] = [];
      for (let i = 0; i < 5; i++) fences.push(await shop.purchase(1, 0));
      const together = await Promise.all([1, 2, 3].map(() => shop.purchase(1, 0)));
      fences.push(...together.sort((a, b) => a - b));
      for (let i = 1; i < fences.length; i++) expect(fences[i]).toBeGreaterThan(fences[i - 1]);
      expect(new Set(fences).size).toBe(fences.length);
    });

    it('waits up to waitTimeout, never less, then rejects with LockNotAcquiredError', async () => {
      const held = gate();
      shop.hold = held.opened;
      const holding = shop.tryPurchase(1);
      await until(() => locks.stats().queues > 0, 'the hold');
      const started = performance.now();
      const err = await locks
        .using('product:1', () => 'got it', { waitTimeout: 80 })
        .catch((e) => e);
      const elapsed = performance.now() - started;
      expect(err).toBeInstanceOf(LockNotAcquiredError);
      expect((err as LockNotAcquiredError).waitedMs).toBeGreaterThanOrEqual(80);
      expect(elapsed).toBeGreaterThanOrEqual(80);
      expect((err as LockNotAcquiredError).retryAfterMs).toBeGreaterThan(0);
      // waitTimeout 0: one try, at once.
      await expect(shop.tryPurchase(1)).rejects.toBeInstanceOf(LockNotAcquiredError);
      held.open();
      await holding;
    });

    it('serves waiters first in, first out', async () => {
      const held = gate();
      shop.hold = held.opened;
      const first = shop.tryPurchase(1);
      await until(() => locks.stats().queues > 0, 'the hold');
      shop.hold = undefined;
      const order: number[] = [];
      // Each joins the line (synchronously) before the next call starts.
      const waiting = [0, 1, 2, 3].map((n) => locks.using('product:1', () => void order.push(n)));
      await until(() => queued('product:1') === 4, 'four waiters');
      held.open();
      await Promise.all([first, ...waiting]);
      expect(order).toEqual([0, 1, 2, 3]);
    });

    it('re-enters a key the call already holds, without a second acquisition', async () => {
      const [outer, inner] = await shop.purchaseTwice(1);
      expect(inner.fence).toBe(outer.fence);
      expect(inner.keys).toEqual(['product:1']);
    });

    it('takes several keys all or nothing, in an order that cannot deadlock', async () => {
      const held = await locks.acquire('account:B');
      let done = false;
      const t = shop.transfer('A', 'B').then((info) => ((done = true), info));
      await until(() => queued('account:B') === 1, 'the transfer waiting for B');
      // A is free, but the transfer took nothing while B was held.
      expect(done).toBe(false);
      expect(await locks.isLocked('account:A')).toBe(false);
      await held.release();
      const info = await t;
      expect(info.keys).toEqual(['account:A', 'account:B']);
      // Opposite directions at once: both finish, one after the other.
      const both = await Promise.all([shop.transfer('A', 'B'), shop.transfer('B', 'A')]);
      const fencesOfA = both.map((i) => i.fences['account:A']);
      expect(new Set(fencesOfA).size).toBe(2);
      expect(Math.min(...fencesOfA)).toBeGreaterThan(info.fences['account:A']);
    });

    it('lets a lease run out after ttl without a watchdog: the key frees and the signal says expired', async () => {
      const held = gate();
      shop.hold = held.opened;
      const first = shop.unrenewed('r1');
      await until(() => locks.stats().queues > 0, 'the hold');
      // Waits for the lease (60 ms) to run out: nobody releases it.
      const second = await locks.using('report:r1', (l) => l.fence, { waitTimeout: 1_000 });
      expect(second).toBeGreaterThan(0);
      held.open();
      const signal = await first;
      expect(signal.aborted).toBe(true);
      expect((signal.reason as LockLostError).reason).toBe('expired');
    });

    it('keeps a lease alive past its ttl while the watchdog renews it', async () => {
      const held = gate();
      shop.hold = held.opened;
      const first = shop.renewed('r2');
      await until(() => locks.stats().queues > 0, 'the hold');
      await sleep(1_300); // more than three leases of 400 ms (150 ms lapsed once on a loaded machine)
      expect(await locks.isLocked('report:r2')).toBe(true);
      await expect(shop.renewed('r2')).rejects.toBeInstanceOf(LockNotAcquiredError);
      held.open();
      expect((await first).aborted).toBe(false);
      expect(await locks.isLocked('report:r2')).toBe(false);
    });

    it('spreads segmented calls over free slices, one slice each', async () => {
      const held = gate();
      shop.hold = held.opened;
      const three = [0, 1, 2].map(() => shop.takeSlice('sku1'));
      await until(() => locks.stats().queues === 3, 'three slices held');
      const fourth = shop.takeSlice('sku1');
      await until(
        () => [0, 1, 2].some((n) => queued(`stock:sku1:seg:${n}`) === 1),
        'the fourth call waiting for a slice',
      );
      held.open();
      const segments = await Promise.all(three);
      expect([...segments].sort()).toEqual([0, 1, 2]);
      shop.hold = undefined;
      expect([0, 1, 2]).toContain(await fourth);
    });

    it('locks in the group a call names', async () => {
      expect(await shop.audit('7')).toBe('audit:7');
      const stats = locks.stats('orders');
      expect(stats.attempts).toBeGreaterThan(0);
      expect(locks.stats('default').attempts).toBeGreaterThan(0);
    });

    it('gives LockService.acquire handles that renew, extend and release', async () => {
      const handle = await locks.acquire(['k:2', 'k:1'], { ttl: 50 });
      expect(handle.keys).toEqual(['k:1', 'k:2']);
      await handle.extend(5_000);
      await sleep(80); // past the first lease (50 ms): only the extension keeps it
      expect(await locks.isLocked('k:1')).toBe(true);
      await handle.release();
      expect(await locks.isLocked('k:1')).toBe(false);
      await expect(handle.extend(1_000)).rejects.toBeInstanceOf(LockLostError);
    });

    /** Callers waiting for `key` in the default group's backend. */
    const queued = (key: string) => moduleRef.get(LockGroupRegistry).get('default').queued(key);
  });

  describe('controls', () => {
    it('busy: the stated retryAfterMs reaches the caller as given, the default as a real backend says it', async () => {
      for (const stated of [500, 2_500, 60_000]) {
        controls.busy('product:7', { retryAfterMs: stated });
        const err = (await shop.purchase(7, 1).catch((e) => e)) as LockNotAcquiredError;
        expect(err).toBeInstanceOf(LockNotAcquiredError);
        expect(err.retryAfterMs).toBe(stated);
      }
      // Without one: the holder's lease left (the ttl), at most the 1 s of a first busy answer.
      controls.busy('product:7');
      const err = (await shop.purchase(7, 1).catch((e) => e)) as LockNotAcquiredError;
      expect(err.retryAfterMs).toBe(FIRST_BUSY_RETRY_MS);
    });

    it('busy: turns the next call away at once, then lets calls through', async () => {
      controls.busy('product:1', { retryAfterMs: 3_000 });
      const started = performance.now();
      const err = await shop.purchase(1, 1).catch((e) => e);
      expect(err).toBeInstanceOf(LockNotAcquiredError);
      // The control states the busy answer: its retryAfterMs is the one the caller gets, even
      // past the 1 s a real backend's first busy answer is capped at.
      expect((err as LockNotAcquiredError).retryAfterMs).toBe(3_000);
      // No wait for the module's 2 s waitTimeout.
      expect(performance.now() - started).toBeLessThan(1_000);
      await expect(shop.purchase(1, 0)).resolves.toBeGreaterThan(0);
      // Other keys are not affected.
      controls.busy('product:1');
      await expect(locks.using('product:2', () => 'ok')).resolves.toBe('ok');
    });

    it('busy: times: Infinity turns every call away until reset(); onBusy skip skips', async () => {
      controls.busy('product:5', { times: Infinity });
      for (let i = 0; i < 3; i++) {
        await expect(shop.tryPurchase(5)).rejects.toBeInstanceOf(LockNotAcquiredError);
      }
      await expect(shop.restock(5)).resolves.toBeUndefined();
      controls.reset();
      await expect(shop.restock(5)).resolves.toBe('restocked 5');
    });

    it('busy: a segmented key covers its slices, one call per use', async () => {
      controls.busy('stock:sku2', { times: 1 });
      await expect(shop.takeSlice('sku2')).rejects.toBeInstanceOf(LockNotAcquiredError);
      await expect(shop.takeSlice('sku2')).resolves.toBeGreaterThanOrEqual(0);
    });

    it('busy: does not turn away a reentrant call that already holds the key', async () => {
      const held = gate();
      shop.hold = held.opened;
      const running = shop.purchaseTwice(3);
      await until(() => locks.stats().queues > 0, 'the outer hold');
      controls.busy('product:3');
      held.open();
      const [outer, inner] = await running;
      expect(inner.fence).toBe(outer.fence);
      await expect(shop.tryPurchase(3)).rejects.toBeInstanceOf(LockNotAcquiredError);
    });

    it('down: every call fails with LockBackendError until restore()', async () => {
      controls.down();
      const err = await shop.purchase(1, 0).catch((e) => e);
      expect(err).toBeInstanceOf(LockBackendError);
      expect((err as LockBackendError).message).toContain('RedlockTestingController.down()');
      await expect(locks.isLocked('product:1')).rejects.toBeInstanceOf(LockBackendError);
      controls.restore();
      await expect(shop.purchase(1, 0)).resolves.toBeGreaterThan(0);
    });

    it('down: a caller already waiting fails with LockBackendError at its deadline, never before', async () => {
      const held = gate();
      shop.hold = held.opened;
      const holding = shop.tryPurchase(1);
      await until(() => locks.stats().queues > 0, 'the hold');
      const started = performance.now();
      const waiting = locks.using('product:1', () => 'late', { waitTimeout: 100 }).catch((e) => e);
      controls.down({ cause: new Error('ECONNREFUSED') });
      const err = await waiting;
      expect(performance.now() - started).toBeGreaterThanOrEqual(100);
      expect(err).toBeInstanceOf(LockBackendError);
      expect((err as LockBackendError).cause).toEqual(new Error('ECONNREFUSED'));
      controls.restore();
      held.open();
      await holding;
    });

    it('down: a release that fails leaves the lock to its lease; waiters get it after restore()', async () => {
      const handle = await locks.acquire('job:9', { ttl: 100 });
      const waiting = locks.using('job:9', (l) => l.fence, { waitTimeout: 2_000 });
      controls.down();
      await handle.release(); // fails (logged, never thrown): the lease runs on
      controls.restore();
      expect(await locks.isLocked('job:9')).toBe(true);
      expect(await waiting).toBeGreaterThan(handle.fence);
    });

    it('lose: the holder learns at once (signal, lost event); the next caller gets a larger fence', async () => {
      const events: LockLostEvent[] = [];
      const onLost = (e: LockLostEvent) => events.push(e);
      locks.on('lost', onLost);
      try {
        const held = gate();
        shop.hold = held.opened;
        const holding = shop.tryPurchase(4);
        await until(() => locks.stats().queues > 0, 'the hold');
        controls.lose('product:4');
        expect(events).toHaveLength(1);
        expect(events[0].keys).toEqual(['product:4']);
        expect(events[0].client).toBe('default');
        expect(events[0].error.reason).toBe('lost');
        // The key is free for the next caller at once, with a larger fence.
        shop.hold = undefined;
        const next = await shop.tryPurchase(4);
        held.open();
        const lost = await holding;
        expect(lost.signal.aborted).toBe(true);
        expect(lost.signal.reason).toBeInstanceOf(LockLostError);
        expect((lost.signal.reason as LockLostError).reason).toBe('lost');
        expect(next.fence).toBeGreaterThan(lost.fence);
        // Reported once: the watchdog stopped with the loss.
        expect(events).toHaveLength(1);
      } finally {
        locks.off('lost', onLost);
      }
    });

    it('lose: reaches an acquire handle too, and says so when nobody holds the key', async () => {
      const handle = await locks.acquire('job:1');
      controls.lose('job:1');
      expect(handle.signal.aborted).toBe(true);
      await handle.release();
      expect(() => controls.lose('job:1')).toThrow(/nobody holds this lock/);
    });

    it('rejects bad control arguments with LockConfigError', () => {
      expect(() => controls.busy('k', { times: 0 })).toThrow(LockConfigError);
      expect(() => controls.busy('k', { client: 'nope' })).toThrow(/Unknown lock client group/);
      expect(() => controls.busy('')).toThrow();
    });
  });

  describe('LockInterceptor over HTTP', () => {
    @Controller('products')
    class ProductsController {
      constructor(private readonly shop: Shop) {}

      @Post(':id/purchase')
      purchase(@Param('id') id: string) {
        return this.shop.purchase(Number(id), 1);
      }

      @Post('orders')
      @Locked('order:{body.id}')
      async order(@Body() body: { id?: string }) {
        return body;
      }
    }

    let app: INestApplication;
    let httpControls: RedlockTestingController;
    beforeAll(async () => {
      const ref = await Test.createTestingModule({
        imports: [RedlockTestingModule.forRoot({ groups: ['default', 'orders'] })],
        controllers: [ProductsController],
        providers: [Shop],
      }).compile();
      app = ref.createNestApplication({ logger: false });
      await app.init();
      httpControls = app.get(RedlockTestingController);
    });
    afterAll(() => app.close());
    afterEach(() => httpControls.reset());

    it('answers 201, 409 with Retry-After when busy, 503 when down', async () => {
      await request(app.getHttpServer()).post('/products/1/purchase').expect(201);
      httpControls.busy('product:1', { retryAfterMs: 2_500 });
      const busy = await request(app.getHttpServer()).post('/products/1/purchase').expect(409);
      // The stated 2.5 s, in whole seconds.
      expect(busy.headers['retry-after']).toBe('3');
      expect(busy.body).toMatchObject({ code: 'LOCK_NOT_ACQUIRED' });
      httpControls.down();
      const down = await request(app.getHttpServer()).post('/products/1/purchase').expect(503);
      expect(down.body).toMatchObject({ code: 'LOCK_BACKEND_UNAVAILABLE' });
      httpControls.restore();
      await request(app.getHttpServer()).post('/products/1/purchase').expect(201);
    });

    it('answers 400 for a key that cannot be rendered', async () => {
      await request(app.getHttpServer()).post('/products/orders').send({ id: 'a' }).expect(201);
      const bad = await request(app.getHttpServer()).post('/products/orders').send({}).expect(400);
      expect(bad.body).toMatchObject({ code: 'LOCK_KEY_INVALID' });
    });
  });
});

describe('RedlockTestingModule options and wiring', () => {
  it('refuses unknown options and clients with a message naming the testing module', () => {
    expect(() => RedlockTestingModule.forRoot({ tll: 5 } as never)).toThrow(
      'Unknown option "tll" in RedlockTestingModule.forRoot options; did you mean "ttl"?',
    );
    expect(() => RedlockTestingModule.forRoot({ clients: ['redis://x'] } as never)).toThrow(
      /"clients" has no effect .* groups: \['default', 'orders'\]/,
    );
    expect(() => RedlockTestingModule.forRoot({ groups: [] })).toThrow(LockConfigError);
  });

  it('validates values as RedlockModule does, at compile', async () => {
    const err = await Test.createTestingModule({
      imports: [RedlockTestingModule.forRoot({ ttl: -1 })],
    })
      .compile()
      .catch((e) => e);
    expect(err).toBeInstanceOf(LockConfigError);
    expect((err as LockConfigError).field).toBe('ttl');
  });

  it('fails startup for a @Locked client group it does not have', async () => {
    @Injectable()
    class Orders {
      @Locked('o:{id}', { client: 'orders' })
      async pay(id: string) {
        return id;
      }
    }
    const ref = await Test.createTestingModule({
      imports: [RedlockTestingModule.forRoot()],
      providers: [Orders],
    }).compile();
    await expect(ref.init()).rejects.toThrow(
      /Unknown lock client group "orders".*RedlockTestingModule\.forRoot\(\{ groups/,
    );
    // Nothing to close: a failed init leaves no connection (and close() would rethrow).
  });

  it('gives @InjectRedlock a stand-in that explains there is no Redis', async () => {
    @Injectable()
    class Escape {
      constructor(@InjectRedlock() readonly redlock: Redlock) {}
    }
    const ref = await Test.createTestingModule({
      imports: [RedlockTestingModule.forRoot()],
      providers: [Escape],
    }).compile();
    const { redlock } = ref.get(Escape);
    expect(() => redlock.acquire(['x'], 1_000)).toThrow(/has no Redis behind it/);
    await ref.close();
  });

  it('without any lock module, DI succeeds and a locked call says what to import', async () => {
    @Injectable()
    class Bare {
      @Locked('bare:{id}')
      async run(id: string) {
        return id;
      }
      plain() {
        return 'not locked';
      }
    }
    const ref = await Test.createTestingModule({ providers: [Bare] }).compile();
    const bare = ref.get(Bare);
    expect(bare.plain()).toBe('not locked');
    const err = await bare.run('1').catch((e) => e);
    expect(err).toBeInstanceOf(LockConfigError);
    expect((err as Error).message).toMatch(/found no LockService/);
    expect((err as Error).message).toMatch(
      /RedlockTestingModule\.forRoot\(\) from 'nest-locked\/testing'/,
    );
    await ref.close();
  });

  it('keeps each testing module to itself: locks in one are not seen by another', async () => {
    const make = () =>
      Test.createTestingModule({ imports: [RedlockTestingModule.forRoot()] }).compile();
    const [a, b] = await Promise.all([make(), make()]);
    const held = await a.get(LockService).acquire('shared:1');
    expect(await b.get(LockService).isLocked('shared:1')).toBe(false);
    expect(await a.get(LockService).isLocked('shared:1')).toBe(true);
    await held.release();
    await Promise.all([a.close(), b.close()]);
  });
});
