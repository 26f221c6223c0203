import 'reflect-metadata';
import { Injectable } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import { Observable } from 'rxjs';
import {
  LockContext,
  type LockContextInfo,
  Locked,
  type LockLostError,
  LockNotAcquiredError,
  LockService,
  RedlockModule,
} from 'nest-locked';
import { until } from '../support/lock-app';

/**
 * A nested call that re-entered a lock never runs after that lock is freed (PRODUCT 2.8): the
 * release of the outermost call waits for the nested calls it let in, even those nobody awaits
 * (`void this.audit(id)`), while the watchdog keeps renewing and maxHold still applies. The
 * outer call's own result is not held back by them. The memory backend: the rule lives above
 * the backends (test/support/backend-scenarios.ts runs it across processes on every server).
 */

/** A promise the test opens when it chooses. */
function gate(): { opened: Promise<void>; open: () => void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

/** What a nested call saw, and its promise (nobody awaits it inside the lock). */
interface Nested {
  info?: LockContextInfo;
  running?: Promise<unknown>;
}

@Injectable()
class Orders {
  constructor(readonly locks: LockService) {}

  @Locked('order:{0}', { waitTimeout: 0 })
  async settle(id: string, nested: Nested, inner: Promise<void>): Promise<string> {
    nested.running = this.audit(id, nested, inner);
    return 'settled';
  }

  @Locked('order:{0}', { waitTimeout: 0 })
  async audit(_id: string, nested: Nested, inner: Promise<void>): Promise<void> {
    nested.info = LockContext.current();
    await inner;
  }

  /** A write hold that starts a read hold of its key and returns. */
  @Locked('doc:{0}', { waitTimeout: 0 })
  async write(id: string, nested: Nested, inner: Promise<void>): Promise<void> {
    nested.running = this.read(id, nested, inner);
  }

  @Locked('doc:{0}', { mode: 'read', waitTimeout: 0 })
  async read(_id: string, nested: Nested, inner: Promise<void>): Promise<void> {
    nested.info = LockContext.current();
    await inner;
  }

  /** An Observable whose subscription starts a nested call, then completes. */
  @Locked('feed:{0}', { waitTimeout: 0 })
  stream(id: string, nested: Nested, inner: Promise<void>): Observable<string> {
    return new Observable<string>((subscriber) => {
      nested.running = this.locks.using(`feed:${id}`, async (info) => {
        nested.info = info;
        await inner;
      });
      subscriber.next('first');
      subscriber.complete();
    });
  }
}

let moduleRef: TestingModule;
let locks: LockService;
let orders: Orders;

beforeAll(async () => {
  moduleRef = await Test.createTestingModule({
    imports: [RedlockModule.forRoot({ backend: 'memory', waitTimeout: 0 })],
    providers: [Orders],
  }).compile();
  await moduleRef.init();
  locks = moduleRef.get(LockService);
  orders = moduleRef.get(Orders);
});
afterAll(() => moduleRef.close());

/** The key is held by someone: another caller is turned away, and isLocked says so. */
async function expectHeld(key: string, options: { mode?: 'read' } = {}): Promise<void> {
  expect(await locks.isLocked(key)).toBe(true);
  await expect(locks.acquire(key, { waitTimeout: 0, ...options })).rejects.toBeInstanceOf(
    LockNotAcquiredError,
  );
}

/** Once the nested call ended, the key is free and its signal never aborted. */
async function expectFreedAfter(key: string, nested: Nested, inner: { open: () => void }) {
  inner.open();
  await nested.running;
  expect(nested.info?.signal.aborted).toBe(false);
  expect(await locks.isLocked(key)).toBe(false);
  const handle = await locks.acquire(key, { waitTimeout: 0 });
  await handle.release();
}

describe('a nested call the outer call does not await', () => {
  it('using: the key stays held until the nested call ends; the outer result is not held back', async () => {
    const inner = gate();
    const nested: Nested = {};
    const outer = await locks.using('k', () => {
      nested.running = locks.using('k', async (info) => {
        nested.info = info;
        await inner.opened;
      });
      return 'outer';
    });
    expect(outer).toBe('outer');
    await expectHeld('k');
    expect(nested.info?.keys).toEqual(['k']);
    expect(nested.info?.signal.aborted).toBe(false);
    await expectFreedAfter('k', nested, inner);
  });

  it('@Locked: a method that starts another locked method of its key and returns', async () => {
    const inner = gate();
    const nested: Nested = {};
    expect(await orders.settle('1', nested, inner.opened)).toBe('settled');
    await expectHeld('order:1');
    await expectFreedAfter('order:1', nested, inner);
  });

  it("read/write: a write holder's nested read hold keeps the write lock (no reader gets in)", async () => {
    const inner = gate();
    const nested: Nested = {};
    await orders.write('2', nested, inner.opened);
    await expectHeld('doc:2', { mode: 'read' });
    await expectHeld('doc:2');
    await expectFreedAfter('doc:2', nested, inner);
  });

  it('Observable: a nested call made in the subscription holds the key past completion', async () => {
    const inner = gate();
    const nested: Nested = {};
    const stream = await orders.stream('3', nested, inner.opened);
    const values: string[] = [];
    await new Promise<void>((complete) =>
      stream.subscribe({ next: (v) => values.push(v), complete }),
    );
    expect(values).toEqual(['first']);
    await expectHeld('feed:3');
    await expectFreedAfter('feed:3', nested, inner);
  });

  it('several keys: a nested call that takes one more key keeps the ones it re-entered', async () => {
    const inner = gate();
    const nested: Nested = {};
    await locks.using('a', () => {
      nested.running = locks.using(['a', 'b'], async (info) => {
        nested.info = info;
        await inner.opened;
      });
    });
    await until(() => nested.info !== undefined, 'the nested call runs');
    await expectHeld('a');
    await expectHeld('b');
    await expectFreedAfter('a', nested, inner);
    expect(await locks.isLocked('b')).toBe(false);
  });

  it('a nested call refused the one more key it asks for leaves the keys it re-entered', async () => {
    const other = await locks.acquire('c');
    await expect(
      locks.using('a', () => locks.using(['a', 'c'], () => 'never runs', { waitTimeout: 0 })),
    ).rejects.toBeInstanceOf(LockNotAcquiredError);
    expect(await locks.isLocked('a')).toBe(false);
    await other.release();
  });

  it('a nested call that throws releases the key too', async () => {
    const inner = gate();
    const running = gate();
    let nestedCall: Promise<unknown> | undefined;
    await locks.using('t', () => {
      nestedCall = locks.using('t', async () => {
        running.open();
        await inner.opened;
        throw new Error('nested failed');
      });
    });
    await running.opened;
    await expectHeld('t');
    inner.open();
    await expect(nestedCall).rejects.toThrow('nested failed');
    expect(await locks.isLocked('t')).toBe(false);
  });

  it('the watchdog renews while the nested call runs; maxHold still ends it', async () => {
    const inner = gate();
    const nested: Nested = {};
    // A lease long enough that a loaded machine's timer delays do not let it lapse between
    // renewals (every ttl / 3).
    const ttl = 400;
    await locks.using(
      'w',
      () => {
        nested.running = locks.using('w', async (info) => {
          nested.info = info;
          await inner.opened;
        });
      },
      { ttl, maxHold: 2_000 },
    );
    const since = Date.now();
    // Three leases pass while the nested call runs: renewed, the key stays held.
    await until(() => Date.now() - since > 3 * ttl, 'three leases');
    const signal = nested.info!.signal;
    expect((signal.reason as LockLostError | undefined)?.reason).toBeUndefined();
    await expectHeld('w');
    // Past maxHold the watchdog stops renewing: the signal says so, the lease runs out.
    await until(() => signal.aborted, 'maxHold', 5_000);
    expect((signal.reason as LockLostError).reason).toBe('maxHold');
    inner.open();
    await nested.running;
    expect(await locks.isLocked('w')).toBe(false);
  });
});
