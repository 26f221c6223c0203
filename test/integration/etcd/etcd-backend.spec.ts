import { Etcd3 } from 'etcd3';
import { Logger } from '@nestjs/common';
import { etcdBackend } from 'nest-locked/etcd';
import { LockNotAcquiredError } from '../../../lib/errors';
import type { Lease, LockBackend } from '../../../lib/core/lock-backend';
import { startEtcdCluster, type EtcdCluster } from '../../support/etcd-server';
import { uniquePrefix } from '../../support/lock-app';

/**
 * What the etcd backend does beyond the contract every backend keeps (that one is
 * test/integration/contract/backend-contract.spec.ts), on one real etcd member: its keys in
 * etcd, FIFO, its handovers and session lease, its options. Each backend below is what one
 * process builds (its own client and session lease), so several of them are several processes.
 */

let etcd: EtcdCluster;
let raw: Etcd3;
const backends: LockBackend[] = [];
let prefix: string;

function backend(options: { sessionTtl?: number } = {}): LockBackend {
  const created = etcdBackend({
    hosts: etcd.hosts,
    sessionTtl: options.sessionTtl ?? 5_000,
  }).create({
    group: 'default',
    keyPrefix: prefix,
    driftFactor: 0.01,
    commandTimeout: 2_000,
    logger: new Logger('etcd-test'),
  });
  backends.push(created);
  return created;
}

/** Every key left under the test's prefix. */
async function leftKeys(): Promise<string[]> {
  return raw.getAll().prefix(prefix).keys();
}

async function eventually(check: () => Promise<boolean> | boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

const call = (
  over: Partial<{ ttl: number; waitTimeout: number; share: 'read' | number }> = {},
) => ({
  ttl: 10_000,
  waitTimeout: 10_000,
  ...over,
});

beforeAll(async () => {
  Logger.overrideLogger(false);
  etcd = await startEtcdCluster(1);
  raw = new Etcd3({ hosts: etcd.hosts });
}, 30_000);

beforeEach(() => {
  prefix = uniquePrefix('etcd');
});

afterEach(async () => {
  await Promise.all(backends.splice(0).map((b) => b.close()));
});

afterAll(async () => {
  raw?.close();
  await etcd?.stop();
});

describe('etcd backend: exclusion and FIFO', () => {
  it('takes a free key with a fence and frees it on release, leaving nothing', async () => {
    const a = backend();
    await a.start?.();
    const lease = await a.acquire(['k'], call());
    expect(lease.fences[0]).toBeGreaterThan(0);
    expect(a.holds('k')).toBe(true);
    expect(await a.isLocked('k')).toBe(true);
    await a.release(lease);
    expect(a.holds('k')).toBe(false);
    expect(await a.isLocked('k')).toBe(false);
    expect(await leftKeys()).toEqual([]);
  });

  it('grants waiters of other processes in arrival order, fences strictly increasing', async () => {
    const holder = backend();
    const first = await holder.acquire(['k'], call());
    const order: number[] = [];
    const fences: number[] = [first.fences[0]];
    const waiters = [backend(), backend(), backend()];
    const calls: Promise<void>[] = [];
    for (const [i, w] of waiters.entries()) {
      calls.push(
        w.acquire(['k'], call()).then(async (lease) => {
          order.push(i);
          fences.push(lease.fences[0]);
          await w.release(lease);
        }),
      );
      // Each in line before the next arrives.
      await eventually(async () => (await raw.getAll().prefix(prefix).keys()).length === i + 2);
    }
    await holder.release(first);
    await Promise.all(calls);
    expect(order).toEqual([0, 1, 2]);
    for (let i = 1; i < fences.length; i++) expect(fences[i]).toBeGreaterThan(fences[i - 1]);
    expect(await leftKeys()).toEqual([]);
  });

  it('callers of one process asking at once are granted in the order they asked, fences rising', async () => {
    const one = backend();
    const first = await one.acquire(['k'], call());
    const order: number[] = [];
    const fences: number[] = [];
    const calls = Array.from({ length: 20 }, (_, i) =>
      one.acquire(['k'], call()).then(async (lease) => {
        order.push(i);
        fences.push(lease.fences[0]);
        await one.release(lease);
      }),
    );
    await eventually(async () => (await leftKeys()).length === 21);
    await one.release(first);
    await Promise.all(calls);
    expect(order).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(fences[0]).toBeGreaterThan(first.fences[0]);
    for (let i = 1; i < fences.length; i++) expect(fences[i]).toBeGreaterThan(fences[i - 1]);
    expect(await leftKeys()).toEqual([]);
  });

  it('an exclusive holder hands over to the next waiter of its process, keeping the line', async () => {
    // The handover reads the waiter's own key first (a revoked lease must get nothing:
    // test/faults/etcd-vanished-key.spec.ts), so it is no longer made before etcd answers.
    const [a, b] = [backend(), backend()];
    const held = await a.acquire(['k'], call());
    const next = a.acquire(['k'], call({ waitTimeout: 2_000 }));
    await eventually(async () => (await leftKeys()).length === 2);
    let laterDone = false;
    const later = b.acquire(['k'], call()).then((lease) => ((laterDone = true), lease));
    await eventually(async () => (await leftKeys()).length === 3);
    await a.release(held);
    const lease = await next;
    expect(lease.fences[0]).toBeGreaterThan(held.fences[0]);
    // The waiter of the other process is still behind `next`'s key.
    await eventually(async () => (await leftKeys()).length === 2);
    expect(laterDone).toBe(false);
    await a.release(lease);
    const last = await later;
    expect(last.fences[0]).toBeGreaterThan(lease.fences[0]);
    await b.release(last);
    expect(await leftKeys()).toEqual([]);
  });

  it("a released key's name is used again, so a line does not pile up deleted keys in etcd", async () => {
    // etcd keeps a deleted key in its index until a compaction, and every range over the line
    // visits it: one new name per hold slowed every later entry into the line.
    const one = backend();
    const tokens = new Set<string>();
    let last = 0;
    for (let i = 0; i < 10; i++) {
      const lease = await one.acquire(['k'], call());
      expect(lease.fences[0]).toBeGreaterThan(last);
      last = lease.fences[0];
      tokens.add(lease.token);
      await one.release(lease);
    }
    expect(tokens.size).toBe(1);
    expect(await leftKeys()).toEqual([]);
  });

  it('a waiter that times out fails as busy and deletes its key', async () => {
    const a = backend();
    const b = backend();
    const held = await a.acquire(['k'], call());
    await expect(b.acquire(['k'], call({ waitTimeout: 300 }))).rejects.toBeInstanceOf(
      LockNotAcquiredError,
    );
    await eventually(async () => (await leftKeys()).length === 1);
    await a.release(held);
    await eventually(async () => (await leftKeys()).length === 0);
  });

  it('a waiter behind a caller of its own process that gives up goes on waiting, then gets the key', async () => {
    const [a, b] = [backend(), backend()];
    const held = await a.acquire(['k'], call());
    const quitter = b.acquire(['k'], call({ waitTimeout: 300 }));
    await eventually(async () => (await leftKeys()).length === 2);
    const patient = b.acquire(['k'], call());
    await expect(quitter).rejects.toBeInstanceOf(LockNotAcquiredError);
    await eventually(async () => (await leftKeys()).length === 2);
    await a.release(held);
    const lease = await patient;
    expect(lease.fences[0]).toBeGreaterThan(held.fences[0]);
    await b.release(lease);
    expect(await leftKeys()).toEqual([]);
  });

  it('a waiter whose signal aborts deletes its key', async () => {
    const a = backend();
    const b = backend();
    const held = await a.acquire(['k'], call());
    const controller = new AbortController();
    const waiting = b.acquire(['k'], { ...call(), signal: controller.signal });
    await eventually(async () => (await leftKeys()).length === 2);
    controller.abort(new Error('gave up'));
    await expect(waiting).rejects.toThrow('gave up');
    await eventually(async () => (await leftKeys()).length === 1);
    await a.release(held);
  });

  it("a busy try or acquire answers the holder's lease left, not the ttl it asked for", async () => {
    const a = backend();
    const b = backend();
    const held = await a.acquire(['k'], call({ ttl: 30_000 }));
    // Held here: this process knows the lease (about 30 s left).
    const here = (await a.tryAcquire(['k'], 1_000)) as number;
    expect(here).toBeGreaterThan(1_000);
    expect(here).toBeLessThanOrEqual(30_000);
    // Held by another process: the holder key's etcd lease left (the 5 s session lease).
    const there = (await b.tryAcquire(['k'], 60_000)) as number;
    expect(there).toBeGreaterThan(0);
    expect(there).toBeLessThanOrEqual(5_000);
    expect(await b.tryAcquireAny(['k'], 60_000)).toBeLessThanOrEqual(5_000);
    // A busy acquire, at once or at its deadline, says the same in its LockNotAcquiredError.
    for (const waitTimeout of [0, 200]) {
      const here = (await a
        .acquire(['k'], call({ ttl: 1_000, waitTimeout }))
        .catch((e: unknown) => e)) as LockNotAcquiredError;
      expect(here).toBeInstanceOf(LockNotAcquiredError);
      expect(here.retryAfterMs).toBeGreaterThan(1_000);
      const there = (await b
        .acquire(['k'], call({ ttl: 60_000, waitTimeout }))
        .catch((e: unknown) => e)) as LockNotAcquiredError;
      expect(there).toBeInstanceOf(LockNotAcquiredError);
      expect(there.retryAfterMs).toBeLessThanOrEqual(5_000);
    }
    await a.release(held);
  });

  it('says a segmented sweep is no single call: tryAcquireAny is a loop of tries here', () => {
    expect(backend().canTakeAny).toBe(false);
  });
});

describe('etcd backend: leases', () => {
  it('extend answers false once the keys are gone, and the hold ends', async () => {
    const a = backend();
    const lease = await a.acquire(['k'], call());
    expect(await a.extend(lease, 10_000)).toBe(true);
    await raw.delete().prefix(prefix);
    expect(await a.extend(lease, 10_000)).toBe(false);
    expect(lease.validAt(performance.now())).toBe(false);
  });

  it('the session lease revoked behind its back: every holder is told at once, waiters enter again', async () => {
    const a = backend({ sessionTtl: 3_000 });
    const b = backend();
    const held = await a.acquire(['k'], call());
    let told = 0;
    held.watcher = { leaseEnded: () => told++ };
    const other = await b.acquire(['other'], call());
    const waiting = a.acquire(['other'], call()).catch((e: unknown) => e);
    await eventually(async () => (await leftKeys()).length === 3);
    const [kv] = await raw
      .getAll()
      .prefix(prefix)
      .exec()
      .then((r) => r.kvs.filter((k) => k.key.toString().includes(':k/')));
    await raw.leaseClient.leaseRevoke({ ID: kv.lease });
    // etcd3 hears of it at the next keep-alive (a third of the TTL): well within the TTL.
    await eventually(() => told === 1, 3_000);
    expect(held.validAt(performance.now())).toBe(false);
    expect(await a.extend(held, 10_000)).toBe(false);
    await b.release(other);
    // The waiter rode through: it entered the line again under a new session.
    const rode = (await waiting) as Lease;
    expect(rode.fences[0]).toBeGreaterThan(other.fences[0]);
    await a.release(rode);
    // The next call of that process opens a new session.
    const again = await a.acquire(['k'], call());
    expect(again.fences[0]).toBeGreaterThan(held.fences[0]);
    await a.release(again);
    expect(await leftKeys()).toEqual([]);
  });

  it('minHold: releaseByExpiry keeps the key for that long, then it goes', async () => {
    const a = backend();
    const b = backend();
    const lease = await a.acquire(['k'], call());
    await a.releaseByExpiry(lease, 500);
    expect(await b.tryAcquire(['k'], 5_000)).toEqual(expect.any(Number));
    const next = await b.acquire(['k'], call());
    expect(next.fences[0]).toBeGreaterThan(lease.fences[0]);
    await b.release(next);
    await eventually(async () => (await leftKeys()).length === 0);
  });

  it('close revokes the session: everything of that process is gone', async () => {
    const a = backend();
    await a.acquire(['k1'], call());
    await a.acquire(['k2'], call());
    await a.close();
    expect(await leftKeys()).toEqual([]);
  });
});

describe('etcd backend: read locks in one process', () => {
  it('in one process: a writer behind two readers waits until both are gone', async () => {
    const one = backend();
    const read1 = await one.acquire(['k'], call({ share: 'read' }));
    const read2 = await one.acquire(['k'], call({ share: 'read' }));
    let write: Lease | undefined;
    const writing = one.acquire(['k'], call()).then((l) => (write = l));
    await eventually(async () => (await leftKeys()).length === 3);
    // The writer's predecessor is the second reader: its release leaves the first one holding.
    await one.release(read2);
    await eventually(async () => (await leftKeys()).length === 2);
    await new Promise((r) => setTimeout(r, 100));
    expect(write).toBeUndefined();
    await one.release(read1);
    await writing;
    await one.release(write!);
    expect(await leftKeys()).toEqual([]);
  });
});

describe('etcd backend: options', () => {
  it.each([
    [{}, 'hosts'],
    [{ hosts: [] }, 'hosts'],
    [{ hosts: '127.0.0.1:2379', client: {} }, 'client'],
    [{ hosts: '127.0.0.1:2379', sessionTtl: 500 }, 'sessionTtl'],
    [{ hosts: '127.0.0.1:2379', ttl: 5 }, 'ttl'],
  ])('%j is a LockConfigError naming %s', (options, field) => {
    expect(() => etcdBackend(options as never)).toThrow(
      expect.objectContaining({ name: 'LockConfigError', field }),
    );
  });

  it("uses a client of the user's as it is and never closes it", async () => {
    const mine = etcdBackend({ client: raw }).create({
      group: 'default',
      keyPrefix: prefix,
      driftFactor: 0.01,
      commandTimeout: 2_000,
      logger: new Logger('etcd-test'),
    });
    const lease = await mine.acquire(['k'], call());
    await mine.release(lease);
    await mine.close();
    await expect(raw.put(`${prefix}still-open`).value('1')).resolves.toBeDefined();
    await raw.delete().key(`${prefix}still-open`);
    expect(await leftKeys()).toEqual([]);
  });
});
