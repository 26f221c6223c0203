import { type INestApplication, Injectable } from '@nestjs/common';
import { Etcd3 } from 'etcd3';
import { Locked, LockContext, LockService, LockNotAcquiredError } from 'nest-locked';
import { etcdBackend } from 'nest-locked/etcd';
import { RedlockHealthIndicator } from 'nest-locked/health';
import { HealthModule } from '../../support/health-app';
import { LockConfigError } from '../../../lib/errors';
import { startEtcdCluster, type EtcdCluster } from '../../support/etcd-server';
import { createLockApp, sleep, uniquePrefix } from '../../support/lock-app';

/**
 * The product above the seam on etcd: @Locked, LockService, LockContext, reentrancy, minHold,
 * segments, events and health, unchanged, over a real etcd member.
 */

jest.setTimeout(30_000);

@Injectable()
class Orders {
  fences: number[] = [];

  @Locked('order:{id}')
  async pay(id: number): Promise<number> {
    const fence = LockContext.current()!.fence;
    this.fences.push(fence);
    // Reentrant: the same key again inside the call does not wait for itself.
    return this.audit(id);
  }

  @Locked('order:{id}')
  async audit(id: number): Promise<number> {
    expect(LockContext.current()!.keys).toEqual([`order:${id}`]);
    return LockContext.current()!.fence;
  }

  @Locked('cron:tick', { waitTimeout: 0, onBusy: 'skip', minHold: 800 })
  async tick(): Promise<string | undefined> {
    return 'ran';
  }

  @Locked('stock:{sku}', { segments: 4, waitTimeout: 5_000 })
  async reserve(sku: string, ms: number): Promise<string> {
    await sleep(ms);
    expect(LockContext.current()!.keys[0]).toContain(sku);
    return LockContext.current()!.keys[0];
  }
}

let etcd: EtcdCluster;
let raw: Etcd3;
let app: INestApplication;
let prefix: string;

beforeAll(async () => {
  etcd = await startEtcdCluster(1);
  raw = new Etcd3({ hosts: etcd.hosts });
  prefix = uniquePrefix('etcd-module');
  app = await createLockApp({
    options: { backend: etcdBackend({ hosts: etcd.hosts, sessionTtl: 5_000 }), keyPrefix: prefix },
    providers: [Orders],
    imports: [HealthModule],
  });
});

afterAll(async () => {
  await app?.close();
  raw?.close();
  await etcd?.stop();
});

const left = () => raw.getAll().prefix(prefix).keys();

describe('nest-locked on etcd', () => {
  it('@Locked runs with a fence, reentrant, and leaves nothing in etcd', async () => {
    const orders = app.get(Orders);
    const inner = await orders.pay(1);
    await orders.pay(1);
    expect(inner).toBe(orders.fences[0]);
    expect(orders.fences[1]).toBeGreaterThan(orders.fences[0]);
    expect(await left()).toEqual([]);
  });

  it('LockService.using excludes, orders, and reports mode and permits', async () => {
    const locks = app.get(LockService);
    const inside: number[] = [];
    let busy = 0;
    await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        locks.using('counter', async () => {
          busy++;
          expect(busy).toBe(1);
          await sleep(2);
          inside.push(i);
          busy--;
        }),
      ),
    );
    expect(inside).toHaveLength(8);
    const info = await locks.using('gate', (lock) => ({ mode: lock.mode, permits: lock.permits }), {
      permits: 3,
    });
    expect(info).toMatchObject({ mode: 'write', permits: 3 });
    const read = await locks.using('doc', (lock) => lock.mode, { mode: 'read' });
    expect(read).toBe('read');
    expect(await left()).toEqual([]);
  });

  it('events: acquired and released reach listeners', async () => {
    const locks = app.get(LockService);
    const seen: string[] = [];
    locks.on('acquired', () => seen.push('acquired'));
    locks.on('released', () => seen.push('released'));
    await locks.using('evented', () => undefined);
    expect(seen).toEqual(['acquired', 'released']);
  });

  it('minHold with onBusy skip: a second tick within minHold is skipped, the key then frees', async () => {
    const orders = app.get(Orders);
    expect(await orders.tick()).toBe('ran');
    expect(await orders.tick()).toBeUndefined();
    const locks = app.get(LockService);
    const deadline = Date.now() + 10_000;
    while (await locks.isLocked('cron:tick')) {
      if (Date.now() > deadline) throw new Error('minHold never ended');
      await sleep(50);
    }
    expect(await orders.tick()).toBe('ran');
  });

  it('segments: concurrent calls spread over the slices', async () => {
    const orders = app.get(Orders);
    const keys = await Promise.all(Array.from({ length: 4 }, () => orders.reserve('a', 200)));
    expect(new Set(keys).size).toBeGreaterThan(1);
  });

  it('a handle held elsewhere makes a call without waiting busy', async () => {
    const locks = app.get(LockService);
    const handle = await locks.acquire('busy-key');
    await expect(locks.using('busy-key', () => 1, { waitTimeout: 0 })).rejects.toBeInstanceOf(
      LockNotAcquiredError,
    );
    await handle.release();
  });

  it('read inside write of the same key is allowed, write inside read fails at once', async () => {
    const locks = app.get(LockService);
    const nested = await locks.using('rw', () =>
      locks.using('rw', () => 'inside', { mode: 'read' }),
    );
    expect(nested).toBe('inside');
    await expect(
      locks.using('rw', () => locks.using('rw', () => 1), { mode: 'read' }),
    ).rejects.toBeInstanceOf(LockConfigError);
  });

  it('health: the endpoint is up, with its latency, and the leader', async () => {
    const result = await app.get(RedlockHealthIndicator).isHealthy();
    expect(result.redlock.groups.default).toEqual({
      status: 'up',
      backend: 'etcd',
      quorum: 1,
      reachable: 1,
      nodes: [{ node: etcd.hosts[0], status: 'up', latencyMs: expect.any(Number), role: 'leader' }],
    });
  });
});
