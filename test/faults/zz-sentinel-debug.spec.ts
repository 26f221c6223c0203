import * as fs from 'node:fs';
import { Redis } from 'ioredis';
import { LockBackendError, LockService, type RedlockModuleOptions } from 'nest-locked';
import type { LoadJob } from '../fixtures/fault-worker';
import { FaultFrame, loadResults, uid, wallNow } from '../support/faults';
import { sleep, uniquePrefix } from '../support/lock-app';
import { type RedisServerHandle, sendCommand, startRedisServer } from '../support/redis-server';
import { type SentinelGroupHandle, startSentinelGroup } from '../support/redis-sentinel';

jest.setTimeout(90_000);
const frame = new FaultFrame();
let group: SentinelGroupHandle;
let data: RedisServerHandle;
const keyPrefix = uniquePrefix('sentinel');
beforeAll(async () => {
  data = frame.track(await startRedisServer());
  group = await startSentinelGroup({ replicas: 3, downAfterMs: 1_000, failoverTimeoutMs: 2_000 });
  frame.servers.push(...group.servers, ...group.sentinels);
});
afterAll(() => frame.stopAll());
const opts = (extra: Record<string, unknown> = {}): RedlockModuleOptions =>
  ({ clients: [group.entry], keyPrefix, commandTimeout: 500, replicaAcks: 1, replicaAckTimeout: 500, ...extra }) as RedlockModuleOptions;

it('debug', async () => {
  {
    const old0 = await group.waitForSteadyState();
    const replicas0 = group.servers.filter((s) => s !== old0 && s.pid !== undefined);
    const rc = replicas0.map((r) => frame.raw(r));
    const pc = frame.raw(old0);
    await Promise.all(rc.map((c) => c.config('SET', 'masterauth', 'not-the-password')));
    await pc.client('KILL', 'TYPE', 'replica');
    await sleep(500);
    old0.kill('SIGKILL');
    await Promise.all(rc.map((c) => c.config('SET', 'masterauth', '')));
    await group.waitForFailover(old0, 20_000);
  }
  await group.waitForSteadyState();
  const app = (await frame.app(opts())).get(LockService);
  const id = uid();
  const LOAD_MS = 8_000;
  const job: LoadJob = {
    scenario: 'load', options: opts({ ttl: 2_000 }) as LoadJob['options'], call: { waitTimeout: 8_000 },
    keys: [`load:${id}:a`, `load:${id}:b`], concurrency: 2, durationMs: LOAD_MS, maxCalls: 5_000,
    delayMs: 2, pauseMs: 20, dataUrl: data.url, dataPrefix: `${keyPrefix}data:${id}:`, timeoutMs: LOAD_MS + 30_000,
  };
  const workers = [0, 1].map(() => frame.worker(job));
  await Promise.all(workers.map((w) => w.ready));
  const held = await app.acquire(`held:${id}`, { ttl: 10_000 });
  const t0 = wallNow();
  const mon: unknown[] = [];
  const conns = new Map<number, Redis>();
  let stop = false;
  const monitor = (async () => {
    while (!stop) {
      const at = Math.round(wallNow() - t0);
      for (const s of group.servers) {
        if (s.pid === undefined) continue;
        const info = await sendCommand('127.0.0.1', s.port, ['INFO', 'replication'], 300).catch((e) => `ERR ${e}`);
        const role = /role:(\w+)/.exec(info)?.[1] ?? info.slice(0, 40);
        const mp = /master_port:(\d+)/.exec(info)?.[1];
        const link = /master_link_status:(\w+)/.exec(info)?.[1];
        const row: Record<string, unknown> = { at, port: s.port, role, mp, link };
        if (role === 'master') {
          const c = conns.get(s.port) ?? new Redis({ host: '127.0.0.1', port: s.port, commandTimeout: 300, maxRetriesPerRequest: 0, retryStrategy: () => null });
          c.on('error', () => undefined);
          conns.set(s.port, c);
          const cl = await c.call('CLIENT', 'LIST').catch(() => '');
          row.clients = String(cl).split('\n').filter((l) => l.includes('cmd=')).map((l) => /cmd=(\S+)/.exec(l)![1] + '/' + /age=(\d+)/.exec(l)![1]).join(',');
          for (const k of ['a', 'b']) {
            const lk = `${keyPrefix}{load:${id}:${k}}`;
            row[k] = await Promise.all([
              c.get(lk).catch(() => '?'), c.pttl(lk).catch(() => '?'),
              c.zrange(`${lk}:q`, 0, -1, 'WITHSCORES').catch(() => '?'), c.hgetall(`${lk}:qm`).catch(() => '?'),
              c.get(`${lk}:wait`).catch(() => '?'), c.get(`${lk}:fence`).catch(() => '?'),
            ]);
          }
        }
        mon.push(row);
      }
      await sleep(100);
    }
  })();
  workers.forEach((w) => w.go());
  await sleep(1_500);
  const old = await group.primary();
  old.kill('SIGKILL');
  const killedAt = wallNow();
  await group.waitForFailover(old, 20_000);
  const failedOverAt = wallNow();
  const { errors, holds } = await loadResults(workers, LOAD_MS + 30_000);
  stop = true;
  await monitor;
  conns.forEach((c) => c.disconnect());
  await held.release();
  const other = errors.filter((e) => e.name !== LockBackendError.name);
  const rel = (t: number) => Math.round(t - killedAt);
  const out = {
    kill: rel(t0), failover: rel(failedOverAt), killedWall: killedAt,
    other: other.map((e) => ({ ...e, calledAt: rel(e.calledAt ?? 0) })),
    backend: errors.filter((e) => e.name === LockBackendError.name).map((e) => [rel(e.calledAt ?? 0), (e.key ?? "").slice(-1), Math.round(e.ms ?? 0), e.message.slice(0, 160)]),
    holds: holds.map((h) => [h.key.slice(-1), h.by, rel(h.start), rel(h.end), h.fence]),
    mon: mon.map((m) => ({ ...(m as object), at: (m as { at: number }).at - Math.round(killedAt - t0) })),
  };
  const file = `/tmp/sdbg/run-${Date.now()}-${other.length ? 'FAIL' : 'ok'}.json`;
  fs.writeFileSync(file, JSON.stringify(out, null, 1));
  console.log(file, other.length);
});
