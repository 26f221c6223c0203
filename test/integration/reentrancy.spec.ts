import { randomBytes } from 'node:crypto';
import { Injectable, type INestApplication } from '@nestjs/common';
import { LockContext, Locked, LockService } from 'nest-locked';
import { describeOverlaps, findOverlaps, type Interval, now } from '../support/intervals';
import { LockGroupRegistry } from '../../lib/module/lock-group.registry';
import { createLockApp, sleep, uniquePrefix, until, within } from '../support/lock-app';
import { type RedisServerHandle, useRedis } from '../support/redis-server';

jest.setTimeout(60_000);

/** What one level of a reentrant call saw. */
interface Level {
  method: string;
  depth: number;
  fence: number;
  keys: readonly string[];
}

// waitTimeout far above the deadlock guard of the tests: a self-deadlock shows as a hang the
// guard reports, not as a LockNotAcquiredError that could be mistaken for contention.
const WAIT = 30_000;

@Injectable()
class AuditService {
  @Locked('tree:{id}', { waitTimeout: WAIT })
  async audit(id: string, depth: number, trail: Level[]): Promise<void> {
    const { fence, keys } = LockContext.current()!;
    trail.push({ method: 'audit', depth, fence, keys });
    await sleep(2);
  }
}

@Injectable()
class TreeService {
  readonly sections: Interval[] = [];

  constructor(private readonly audits: AuditService) {}

  @Locked('tree:{id}', { waitTimeout: WAIT })
  async walk(id: string, depth: number, trail: Level[] = []): Promise<Level[]> {
    const start = now();
    const { fence, keys } = LockContext.current()!;
    trail.push({ method: 'walk', depth, fence, keys });
    await sleep(5);
    if (depth > 0) {
      // Itself, recursively, and another locked method (of another provider) on the same key.
      await this.walk(id, depth - 1, trail);
      await this.check(id, depth, trail);
      await this.audits.audit(id, depth, trail);
    }
    if (depth === trail[0].depth) this.sections.push({ key: keys[0], start, end: now(), fence });
    return trail;
  }

  @Locked('tree:{id}', { waitTimeout: WAIT })
  async check(id: string, depth: number, trail: Level[]): Promise<void> {
    const { fence, keys } = LockContext.current()!;
    trail.push({ method: 'check', depth, fence, keys });
  }
}

describe('reentrancy', () => {
  let server: RedisServerHandle;
  let app: INestApplication;
  let tree: TreeService;
  let locks: LockService;

  beforeAll(async () => {
    server = await useRedis();
    app = await createLockApp({
      options: { clients: [server.url], keyPrefix: uniquePrefix('reent') },
      providers: [TreeService, AuditService],
    });
    tree = app.get(TreeService);
    locks = app.get(LockService);
  });
  afterAll(async () => {
    await app?.close();
    await server?.stop();
  });

  it('lets a locked method call itself and another locked method on the same key (no deadlock)', async () => {
    const id = randomBytes(4).toString('hex');
    const trail = await within(tree.walk(id, 4), 10_000, 'a reentrant call (deadlock?)');

    // walk 4..0, check 4..1 and audit 4..1 all ran.
    expect(trail.filter((l) => l.method === 'walk').map((l) => l.depth)).toEqual([4, 3, 2, 1, 0]);
    expect(trail.filter((l) => l.method === 'check')).toHaveLength(4);
    expect(trail.filter((l) => l.method === 'audit')).toHaveLength(4);
    // Every level ran under the outermost hold: same key, same fence (no second acquisition).
    expect(new Set(trail.map((l) => l.fence)).size).toBe(1);
    for (const l of trail) expect(l.keys).toEqual([`tree:${id}`]);
    // Released when the outermost call ended.
    expect(await locks.isLocked(`tree:${id}`)).toBe(false);
  });

  it('still excludes two separate concurrent requests on that key', async () => {
    const id = randomBytes(4).toString('hex');
    tree.sections.length = 0;
    const [a, b] = await within(
      Promise.all([tree.walk(id, 3), tree.walk(id, 3)]),
      20_000,
      'two concurrent reentrant calls',
    );
    // Each request re-entered under its own hold...
    expect(new Set(a.map((l) => l.fence)).size).toBe(1);
    expect(new Set(b.map((l) => l.fence)).size).toBe(1);
    // ...and the two holds are distinct and did not overlap.
    expect(a[0].fence).not.toBe(b[0].fence);
    expect(tree.sections).toHaveLength(2);
    expect(describeOverlaps(findOverlaps(tree.sections))).toBe('');
    expect(findOverlaps(tree.sections)).toHaveLength(0);
    expect(await locks.isLocked(`tree:${id}`)).toBe(false);
  });

  it("does not let a caller that merely shares the process re-enter someone else's hold", async () => {
    const id = randomBytes(4).toString('hex');
    const handle = await locks.acquire(`tree:${id}`, { waitTimeout: 0 });
    let settled = false;
    const call = tree.check(id, 0, []).finally(() => (settled = true));
    try {
      // The handle's hold is not this call's: it waits (in line here, not inside the hold).
      const client = app.get(LockGroupRegistry).get('default');
      await until(() => client.queued(`tree:${id}`) === 1, 'the call waiting');
      expect(settled).toBe(false);
    } finally {
      await handle.release();
    }
    await within(call, 5_000, 'the waiting call after release');
    expect(settled).toBe(true);
  });
});
