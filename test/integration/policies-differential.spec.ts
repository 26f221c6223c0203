import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Redis } from 'ioredis';
import {
  ALL_POLICIES,
  type EnginePolicies,
  NO_POLICIES,
  POLICY_NAMES,
} from '../../lib/redis/engine-policies';
import type { PolicyLine, PolicyWorkerConfig } from '../fixtures/policy-worker';
import { describeOverlaps, findOverlaps, maxConcurrency } from '../support/intervals';
import { uniquePrefix, until } from '../support/lock-app';
import { redisForFile } from '../support/redis-for-file';
import type { RedisServerHandle } from '../support/redis-server';
import { spawnWorker } from '../support/workers';

/**
 * The engine's fast paths against the plain path (docs/ARCHITECTURE.md, "Fast paths"): one
 * seeded scenario (a few OS processes on a few hot keys, read holds and writes on another key,
 * permits of 2 on a third) run with every policy off, then with each one on alone, then all on.
 * Every run must reach the same verdicts: no overlap, exact counters, fences rising in hold
 * order, nothing left in Redis, every call held or refused with a typed error.
 */
jest.setTimeout(120_000);

const WORKERS = 3;
const CALLS = 40;
const HOT_KEYS = ['hot:a', 'hot:b'];
const READ_KEY = 'doc';
const PERMIT_KEY = 'pool';

let server: RedisServerHandle;
let redis: Redis;
redisForFile((s, r) => {
  server = s;
  redis = r;
});

type Hold = Extract<PolicyLine, { type: 'hold' }>;
type Done = Extract<PolicyLine, { type: 'done' }>;

/** Runs the scenario with `policies` in every worker; the holds and refusals of all of them. */
async function run(policies: EnginePolicies, keyPrefix: string, dataDir: string) {
  const workers = Array.from({ length: WORKERS }, (_, i) =>
    spawnWorker<PolicyWorkerConfig, PolicyLine>(
      {
        redisUrl: server.url,
        keyPrefix,
        dataDir,
        timeoutMs: 60_000,
        policies,
        seed: 1000 + i,
        calls: CALLS,
        hotKeys: HOT_KEYS,
        readKey: READ_KEY,
        permitKey: PERMIT_KEY,
      },
      'policy-worker',
    ),
  );
  await Promise.all(workers.map((w) => w.ready));
  workers.forEach((w) => w.go());
  const results = await Promise.all(workers.map((w) => w.exited));
  for (const r of results) {
    const errors = r.lines.filter((l) => l.type === 'error');
    expect({ code: r.code, errors, other: r.code === 0 ? '' : r.other }).toEqual({
      code: 0,
      errors: [],
      other: '',
    });
    // Every call held or was refused with a typed error (the worker fails on any other).
    const ended = r.lines.filter((l) => l.type === 'hold' || l.type === 'failed').length;
    expect(ended).toBe(CALLS);
  }
  const lines = results.flatMap((r) => r.lines);
  const done = lines.filter((l): l is Done => l.type === 'done');
  const sum = (count: (d: Done) => number) => done.reduce((n, d) => n + count(d), 0);
  return {
    localHandoffs: sum((d) => d.localHandoffs),
    holds: lines.filter((l): l is Hold => l.type === 'hold'),
    refused: lines.filter((l) => l.type === 'failed').length,
  };
}

const runs: [string, EnginePolicies][] = [
  ['none', NO_POLICIES],
  ...POLICY_NAMES.map((name): [string, EnginePolicies] => [
    `${name} alone`,
    { ...NO_POLICIES, [name]: true },
  ]),
  ['all', ALL_POLICIES],
];

describe('every fast path keeps the plain path verdicts', () => {
  it.each(runs)('policies: %s', async (_label, policies) => {
    const keyPrefix = uniquePrefix('policies');
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'policies-'));
    try {
      const { holds, localHandoffs } = await run(policies, keyPrefix, dataDir);
      // A path switched off is never taken (permit passes count as local handoffs); a hot key
      // shared by callers of each process is passed on when the local handoff is on.
      if (!policies.localHandoff && !policies.permitPass) expect(localHandoffs).toBe(0);
      if (policies.localHandoff) expect(localHandoffs).toBeGreaterThan(0);
      const writes = holds.filter((h) => h.kind === 'write');
      const reads = holds.filter((h) => h.kind === 'read');
      const permits = holds.filter((h) => h.kind === 'permit');

      // No two writes of a key at once, and no read beside a write of its key.
      const overlaps = findOverlaps([...writes, ...reads]).filter(
        ([a, b]) => a.kind === 'write' || b.kind === 'write',
      );
      expect(describeOverlaps(overlaps)).toBe('');
      expect(maxConcurrency(permits)).toBeLessThanOrEqual(2);

      // Exact counters: every write's bump kept.
      for (const key of [...HOT_KEYS, READ_KEY]) {
        const held = writes.filter((w) => w.key === key).length;
        const value = Number(await fs.readFile(path.join(dataDir, key), 'utf8').catch(() => '0'));
        expect({ key, value }).toEqual({ key, value: held });
      }

      // Fences strictly increasing per key in the order the writes held it.
      for (const key of [...HOT_KEYS, READ_KEY]) {
        const fences = writes
          .filter((w) => w.key === key)
          .sort((a, b) => a.start - b.start)
          .map((w) => w.fence);
        const falls = fences.filter((f, i) => i > 0 && f <= fences[i - 1]);
        expect({ key, falls }).toEqual({ key, falls: [] });
      }
      // The scenario did run: most calls held.
      expect(holds.length).toBeGreaterThan((WORKERS * CALLS) / 2);

      // Nothing left in Redis: no lock, queue or holder keys of this run. The fencing counters
      // stay by design; a wait flag may outlive the run only with an expiry of its own.
      let left: string[] = [];
      await until(async () => {
        const keys = await redis.keys(`${keyPrefix}*`);
        left = keys.filter((k) => !k.endsWith(':fence') && !k.endsWith(':wait'));
        return left.length === 0;
      }, 'the run to leave nothing in Redis').catch(() => undefined);
      expect(left).toEqual([]);
      for (const flag of await redis.keys(`${keyPrefix}*:wait`)) {
        expect({ flag, expires: (await redis.pttl(flag)) > 0 }).toEqual({ flag, expires: true });
      }
    } finally {
      await fs.rm(dataDir, { recursive: true, force: true });
    }
  });
});
