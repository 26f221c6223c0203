import 'reflect-metadata';
import { Injectable, Logger } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Redis } from 'ioredis';
import {
  LockConfigError,
  LockContext,
  Locked,
  LockNotAcquiredError,
  LockService,
  RedlockModule,
  type LockBackendDefinition,
} from 'nest-locked';
import { resolveRedlockOptions } from '../../lib/options/redlock-options';
import { InMemoryBackend } from '../../lib/memory/in-memory-backend';

/**
 * `backend: 'memory'` and the backend seam: a group on another backend than Redis, chosen
 * explicitly, said at startup, never connecting to Redis.
 */

const connect = jest.spyOn(Redis.prototype, 'connect');
afterAll(() => expect(connect).not.toHaveBeenCalled());

@Injectable()
class Shop {
  stock = 1;
  @Locked('product:{0}', { waitTimeout: 0 })
  async buy(_id: number, gate?: Promise<void>): Promise<number | undefined> {
    await gate;
    if (this.stock <= 0) return undefined;
    this.stock -= 1;
    return LockContext.current()?.fence;
  }
}

describe("RedlockModule.forRoot({ backend: 'memory' })", () => {
  it('locks within the process, with fences, and says so in one startup line', async () => {
    const log = jest.spyOn(Logger.prototype, 'log').mockImplementation(() => undefined);
    const moduleRef = await Test.createTestingModule({
      imports: [RedlockModule.forRoot({ backend: 'memory' })],
      providers: [Shop],
    }).compile();
    await moduleRef.init();
    const said = log.mock.calls.map(([message]) => String(message));
    log.mockRestore();
    expect(said.filter((m) => m.includes('memory backend'))).toEqual([
      expect.stringContaining('locks within this process only'),
    ]);
    const shop = moduleRef.get(Shop);
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const first = shop.buy(1, gate);
    await expect(shop.buy(1)).rejects.toBeInstanceOf(LockNotAcquiredError);
    open();
    expect(await first).toBe(1);
    expect(await shop.buy(1)).toBeUndefined();
    await expect(moduleRef.get(LockService).isLocked('product:1')).resolves.toBe(false);
    await moduleRef.close();
  });

  it("builds named groups of any backend, each from its own definition's create()", () => {
    const made: string[] = [];
    const custom: LockBackendDefinition = {
      kind: 'custom',
      supports: { read: false, permits: false },
      create: ({ group, driftFactor }) => {
        made.push(group);
        return new InMemoryBackend(group, driftFactor);
      },
    };
    const options = resolveRedlockOptions({
      groups: { default: { backend: custom }, jobs: { clients: ['redis://127.0.0.1:6390'] } },
    });
    expect(Object.keys(options.backends)).toEqual(['default']);
    expect(options.groups).toEqual({ jobs: ['redis://127.0.0.1:6390'] });
    expect(made).toEqual([]);
  });

  it.each([
    [{ clients: ['redis://127.0.0.1'], backend: 'memory' }, 'clients and backend'],
    [{ backend: 'memory', groups: { a: { backend: 'memory' } } }, 'backend and groups'],
  ])('refuses two ways of naming groups at once (%p)', (options, named) => {
    expect(() => resolveRedlockOptions(options)).toThrow(LockConfigError);
    expect(() => resolveRedlockOptions(options)).toThrow(named);
  });

  it.each([
    [{ backend: 'postgres' }, 'backend'],
    [{ backend: { kind: 'x' } }, 'backend'],
    [{ groups: { a: {} } }, 'groups.a'],
    [{ groups: { a: { backend: 'memory', clients: ['redis://x'] } } }, 'groups.a'],
    [{ groups: { a: { clients: [] } } }, 'groups.a.clients'],
    [{ groups: {} }, 'groups'],
  ])('names the field of a bad backend or group (%p)', (options, field) => {
    try {
      resolveRedlockOptions(options);
      throw new Error('accepted');
    } catch (err) {
      expect(err).toBeInstanceOf(LockConfigError);
      expect((err as LockConfigError).field).toBe(field);
    }
  });

  /** A memory backend that says it has no shared holds. */
  const exclusiveOnly: LockBackendDefinition = {
    kind: 'exclusive-only',
    supports: { read: false, permits: false },
    create: ({ group, driftFactor }) => new InMemoryBackend(group, driftFactor),
  };

  it('refuses at startup a read lock on a backend without one', async () => {
    @Injectable()
    class Reader {
      @Locked('doc:{0}', { mode: 'read' })
      async read(_id: number): Promise<void> {}
    }
    const moduleRef = await Test.createTestingModule({
      imports: [RedlockModule.forRoot({ backend: exclusiveOnly })],
      providers: [Reader],
    }).compile();
    // Nest runs onModuleInit hooks synchronously up to the first await: the throw may escape init().
    await expect(Promise.resolve().then(() => moduleRef.init())).rejects.toThrow(
      /exclusive-only backend has no shared/,
    );
    await moduleRef.close().catch(() => undefined);
  });

  it('refuses in using and acquire a read lock or permits on a backend without them', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [RedlockModule.forRoot({ backend: exclusiveOnly })],
    }).compile();
    await moduleRef.init();
    const locks = moduleRef.get(LockService);
    const read = locks.using('doc:1', () => 1, { mode: 'read' });
    await expect(read).rejects.toThrow(LockConfigError);
    await expect(read).rejects.toThrow(/exclusive-only backend has no shared \(read\) lock/);
    await expect(locks.acquire('doc:1', { permits: 3 })).rejects.toThrow(
      /exclusive-only backend has no permits/,
    );
    // The exclusive lock is there.
    await expect(locks.using('doc:1', () => 2)).resolves.toBe(2);
    await moduleRef.close();
  });
});
