import 'reflect-metadata';
import { setTimeout as sleep } from 'node:timers/promises';
import { Injectable } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import {
  LockConfigError,
  LockContext,
  Locked,
  LockNotAcquiredError,
  LockService,
  type LockHandle,
} from 'nest-locked';
import { RedlockTestingController, RedlockTestingModule } from 'nest-locked/testing';

/**
 * `nest-locked/testing` with read/write locks and permits (PRODUCT.md 2.7): the same semantics
 * as the Redis engine, in memory.
 */

@Injectable()
class Docs {
  readonly trail: string[] = [];

  @Locked('doc:{id}', { waitTimeout: 1_000 })
  async write(id: string, inner?: 'read'): Promise<string> {
    const { mode, permits } = LockContext.current()!;
    this.trail.push(`write ${mode} ${permits}`);
    if (inner === 'read') await this.read(id);
    return mode;
  }

  @Locked('doc:{id}', { mode: 'read', waitTimeout: 1_000 })
  async read(id: string, inner?: 'write'): Promise<string> {
    const { mode } = LockContext.current()!;
    this.trail.push(`read ${mode}`);
    if (inner === 'write') await this.write(id);
    return mode;
  }
}

let moduleRef: TestingModule;
let locks: LockService;
let controls: RedlockTestingController;

beforeAll(async () => {
  moduleRef = await Test.createTestingModule({
    imports: [RedlockTestingModule.forRoot({ waitTimeout: 1_000 })],
    providers: [Docs],
  }).compile();
  await moduleRef.init();
  locks = moduleRef.get(LockService);
  controls = moduleRef.get(RedlockTestingController);
});

afterAll(() => moduleRef.close());
afterEach(() => controls.reset());

const read = { mode: 'read' as const };

it('readers share a key at the last writer fence; writers exclude them', async () => {
  const w = await locks.acquire('k1');
  await w.release();
  const r1 = await locks.acquire('k1', read);
  const r2 = await locks.acquire('k1', { ...read, waitTimeout: 0 });
  expect([r1.fence, r2.fence]).toEqual([w.fence, w.fence]);
  expect([r1.mode, r1.permits]).toEqual(['read', 1]);
  expect(await locks.isLocked('k1')).toBe(true);
  await expect(locks.acquire('k1', { waitTimeout: 0 })).rejects.toBeInstanceOf(
    LockNotAcquiredError,
  );
  await r1.release();
  await r2.release();
  const w2 = await locks.acquire('k1', { waitTimeout: 0 });
  expect(w2.fence).toBeGreaterThan(w.fence);
  await expect(locks.acquire('k1', { ...read, waitTimeout: 0 })).rejects.toBeInstanceOf(
    LockNotAcquiredError,
  );
  await w2.release();
  expect(await locks.isLocked('k1')).toBe(false);
});

it('a waiting writer is not overtaken by later readers; readers waiting together go together', async () => {
  const r = await locks.acquire('k2', read);
  const order: string[] = [];
  const writer = locks.using('k2', async () => {
    order.push('writer');
    await sleep(20);
  });
  const late = [1, 2].map((n) =>
    locks.using(
      'k2',
      async () => {
        order.push(`reader ${n}`);
        await sleep(20);
        order.push(`reader ${n} done`);
      },
      read,
    ),
  );
  await sleep(10);
  expect(order).toEqual([]);
  await r.release();
  await Promise.all([writer, ...late]);
  expect(order).toEqual(['writer', 'reader 1', 'reader 2', 'reader 1 done', 'reader 2 done']);
});

it('permits: N at once with unique increasing fences, another N refused naming both', async () => {
  const held: LockHandle[] = [];
  for (let i = 0; i < 3; i++) held.push(await locks.acquire('k3', { permits: 3 }));
  const fences = held.map((h) => h.fence);
  expect(fences).toEqual([...fences].sort((a, b) => a - b));
  expect(new Set(fences).size).toBe(3);
  await expect(locks.acquire('k3', { permits: 3, waitTimeout: 0 })).rejects.toBeInstanceOf(
    LockNotAcquiredError,
  );
  const other = await locks.acquire('k3', { permits: 4 }).catch((e: unknown) => e);
  expect(other).toBeInstanceOf(LockConfigError);
  expect((other as Error).message).toMatch(/permits: 4.*permits: 3/);
  const next = locks.acquire('k3', { permits: 3 });
  await held[0].release();
  const fourth = await next;
  expect(fourth.fence).toBeGreaterThan(Math.max(...fences));
  for (const h of [held[1], held[2], fourth]) await h.release();
});

it('reentrancy: write enters read; read asking for write fails at once', async () => {
  const docs = moduleRef.get(Docs);
  await expect(docs.write('a', 'read')).resolves.toBe('write');
  expect(docs.trail).toEqual(['write write 1', 'read write']);
  const error = await docs.read('a', 'write').catch((e: unknown) => e);
  expect(error).toBeInstanceOf(LockConfigError);
  expect((error as Error).message).toMatch(/holds it for reading/);
});

it('a lost share aborts its holder signal (the lose control)', async () => {
  const h = await locks.acquire('k4', { permits: 2 });
  const other = await locks.acquire('k4', { permits: 2 });
  controls.lose('k4');
  expect(h.signal.aborted).toBe(true);
  expect(other.signal.aborted).toBe(false);
  await h.release();
  await other.release();
});
