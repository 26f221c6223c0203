import type { INestApplication } from '@nestjs/common';
import { type LockHandle, LockService } from 'nest-locked';
import { type BackendSpec, backendModuleOptions } from '../fixtures/backend-spec';
import type { OrderWorkerConfig, OrderWorkerLine } from '../fixtures/order-worker';
import { startEtcdCluster } from '../support/etcd-server';
import { createLockApp, uniquePrefix, until } from '../support/lock-app';
import { startRedisServer } from '../support/redis-server';
import { killWorkers, spawnWorker, type Worker, type WorkerResult } from '../support/workers';

/**
 * Lock-order checking across instances (PRODUCT 2.11), on Redis and on etcd (the backends that
 * store the order graph): two OS processes, one nests `a:{id}` -> `b:{id}`, the other
 * `b:{id}` -> `a:{id}`, one after the other (never at the same time, so nothing deadlocks). The
 * second warns at its first B -> A acquire, before it waits (this test holds the inner key, so
 * the acquire is still waiting when the warning is seen); with `lockOrder: 'throw'` that acquire
 * fails with LockOrderError and nothing stays locked. A sorted multi-key call and a declared
 * order raise nothing. `SHOW_ORDER_REPORT=1` prints the workers' lines.
 */
jest.setTimeout(90_000);

type Line = OrderWorkerLine;
type Result = WorkerResult<Line>;

const BACKENDS: [string, () => Promise<{ spec: BackendSpec; stop: () => Promise<void> }>][] = [
  [
    'redis',
    async () => {
      const redis = await startRedisServer();
      return { spec: { kind: 'redis', clients: [redis.url] }, stop: () => redis.stop() };
    },
  ],
  [
    'etcd',
    async () => {
      const etcd = await startEtcdCluster(1);
      return {
        spec: { kind: 'etcd', options: { hosts: etcd.hosts, sessionTtl: 5_000 } },
        stop: () => etcd.stop(),
      };
    },
  ],
];

afterAll(() => killWorkers());

/** What a worker printed, one word per line (`warn`, `outer`, `LockOrderError`...). */
const trace = (lines: readonly Line[]): string[] =>
  lines.map((l) =>
    l.type === 'step'
      ? l.name
      : l.type === 'refused'
        ? l.name
        : l.type === 'locked'
          ? `locked a:${l.a} b:${l.b}`
          : l.type,
  );

const show = (title: string, r: Result | Worker<Line>) => {
  if (!process.env.SHOW_ORDER_REPORT) return;
  const lines = r.lines.map((l) =>
    'message' in l ? `${l.type}:\n${l.message}` : JSON.stringify(l),
  );
  process.stdout.write(`\n--- ${title}\n${lines.join('\n')}\n`);
};

describe.each(BACKENDS)('lock order across two processes on %s', (kind, startServer) => {
  let spec: BackendSpec;
  let stop: () => Promise<void>;
  const apps: INestApplication[] = [];

  beforeAll(async () => ({ spec, stop } = await startServer()));
  afterAll(async () => {
    await Promise.all(apps.map((a) => a.close()));
    await stop?.();
  });

  function worker(
    config: Pick<OrderWorkerConfig, 'keyPrefix' | 'lockOrder' | 'scenario' | 'id'>,
  ): Worker<Line> {
    return spawnWorker<OrderWorkerConfig, Line>(
      { ...config, backend: spec, timeoutMs: 60_000 },
      'order-worker',
    );
  }

  /** Runs one worker to its end. */
  async function runToEnd(w: Worker<Line>): Promise<Result> {
    await w.ready;
    w.go();
    return w.exited;
  }

  /** The first process: a -> b, seen and stored without a word. */
  async function firstOrder(keyPrefix: string, lockOrder: 'warn' | 'throw'): Promise<void> {
    const r = await runToEnd(worker({ keyPrefix, lockOrder, scenario: 'ab', id: '1' }));
    show(`${kind} ${lockOrder}: process 1 (a -> b)`, r);
    expect({ code: r.code, trace: trace(r.lines) }).toEqual({
      code: 0,
      trace: ['ready', 'outer', 'inner', 'locked a:false b:false', 'done'],
    });
  }

  /** A lock held by this test process, so a worker's acquire of it waits. */
  async function hold(keyPrefix: string, key: string): Promise<LockHandle> {
    const app = await createLockApp({
      options: backendModuleOptions(spec, { keyPrefix, lockOrder: 'off' }),
    });
    apps.push(app);
    return app.get(LockService).acquire(key);
  }

  it("'warn': the second process warns at its first B -> A acquire, before it waits", async () => {
    const keyPrefix = uniquePrefix(`order-warn-${kind}`);
    await firstOrder(keyPrefix, 'warn');
    const held = await hold(keyPrefix, 'a:2');
    const second = worker({ keyPrefix, lockOrder: 'warn', scenario: 'ba', id: '2' });
    await second.ready;
    second.go();
    await until(() => second.lines.some((l) => l.type === 'warn'), 'the warning', 20_000);
    // Still waiting for a:2 (held here): warned before the wait, not after a timeout.
    expect(trace(second.lines)).toEqual(['ready', 'outer', 'warn']);
    await held.release();
    const r = await second.exited;
    show(`${kind} warn: process 2 (b -> a)`, r);
    expect({ code: r.code, trace: trace(r.lines) }).toEqual({
      code: 0,
      trace: ['ready', 'outer', 'warn', 'inner', 'locked a:false b:false', 'done'],
    });
    const warning = (r.lines.find((l) => l.type === 'warn') as { message: string }).message;
    expect(warning).toContain('a cycle of 2 lock classes');
    expect(warning).toMatch(
      /a:\{\}\/exclusive -> b:\{\}\/exclusive +first at Nesting\.b inside Nesting\.aThenB on \S+:\d+/,
    );
    expect(warning).toMatch(
      /b:\{\}\/exclusive -> a:\{\}\/exclusive +first at Nesting\.a inside Nesting\.bThenA on \S+:\d+/,
    );
    // The two edges come from two instances (two pids).
    const pids = [...warning.matchAll(/ on \S+:(\d+)/g)].map((m) => m[1]);
    expect(new Set(pids).size).toBe(2);
  });

  it("'throw': that acquire fails with LockOrderError before it waits, and nothing is locked", async () => {
    const keyPrefix = uniquePrefix(`order-throw-${kind}`);
    await firstOrder(keyPrefix, 'throw');
    const r = await runToEnd(worker({ keyPrefix, lockOrder: 'throw', scenario: 'ba', id: '2' }));
    show(`${kind} throw: process 2 (b -> a)`, r);
    expect({ code: r.code, trace: trace(r.lines) }).toEqual({
      code: 0,
      trace: ['ready', 'outer', 'warn', 'LockOrderError', 'locked a:false b:false', 'done'],
    });
    const refused = r.lines.find((l) => l.type === 'refused') as { message: string };
    expect(refused.message).toContain('was not taken');
  });

  it('a sorted multi-key call and a declared order raise nothing', async () => {
    const keyPrefix = uniquePrefix(`order-quiet-${kind}`);
    await firstOrder(keyPrefix, 'throw');
    const r = await runToEnd(worker({ keyPrefix, lockOrder: 'throw', scenario: 'quiet', id: '3' }));
    expect({ code: r.code, trace: trace(r.lines) }).toEqual({
      code: 0,
      trace: ['ready', 'locked a:false b:false', 'done'],
    });
  });
});
