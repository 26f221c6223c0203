import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type {
  BackendSpec,
  BackendWorkerConfig,
  BackendWorkerLine,
} from '../fixtures/backend-worker';
import { findOverlaps } from './intervals';
import { uniquePrefix } from './lock-app';
import { killWorkers, spawnWorker, type Worker, type WorkerResult } from './workers';

/**
 * The scenarios every backend must pass, across OS processes (PRODUCT 5): one `describe` block
 * that a backend's spec file calls with a way to start its server. Each scenario runs
 * `test/fixtures/backend-worker.ts` in `processes` workers at once over the backend, and checks
 * what the workers report with an independent checker (`findOverlaps`) and the data they
 * guarded (files: a read, a wait, a write, so a missing lock loses updates).
 *
 * @example
 * ```ts
 * describeBackendScenarios('postgres', async () => {
 *   const pg = await startPostgres();
 *   return { spec: { kind: 'postgres', options: { connectionString: pg.url } }, stop: pg.stop };
 * });
 * ```
 */
export interface BackendUnderTest {
  spec: BackendSpec;
  /** Stops what the setup started. */
  stop(): Promise<void>;
}

export interface BackendScenarioOptions {
  /** OS processes per scenario. @default 4 */
  processes?: number;
  /** Calls per process and counter in the counter scenario. @default 10 */
  calls?: number;
  /** Lease of the workers' calls, in ms. @default 10_000 */
  ttl?: number;
  /** How long a worker waits for a busy key, in ms. @default 20_000 */
  waitTimeout?: number;
  /** Limit of one scenario, in ms (the workers exit on their own past it). @default 60_000 */
  timeoutMs?: number;
  /** Whether the backend has permits (MySQL has not). @default true */
  permits?: boolean;
}

type Line<T extends BackendWorkerLine['type']> = Extract<BackendWorkerLine, { type: T }>;
type Result = WorkerResult<BackendWorkerLine>;

const linesOf = <T extends BackendWorkerLine['type']>(results: Result[], type: T): Line<T>[] =>
  results.flatMap((r) => r.lines).filter((l): l is Line<T> => l.type === type);

const failures = (results: Result[]) =>
  results
    .filter((r) => r.code !== 0)
    .map(
      (r) =>
        `exit ${r.code ?? r.signal}: ${JSON.stringify(linesOf([r], 'error').slice(0, 3))} ${r.other.slice(0, 1500)}`,
    );

export function describeBackendScenarios(
  name: string,
  setup: () => Promise<BackendUnderTest>,
  options: BackendScenarioOptions = {},
): void {
  const processes = options.processes ?? 4;
  const calls = options.calls ?? 10;
  const timeoutMs = options.timeoutMs ?? 60_000;
  let backend: BackendUnderTest;
  let dataDir: string;

  /** Spawns one worker per process with the scenario, starts them together, waits for all. */
  async function run(
    scenario: Omit<BackendWorkerConfig, 'backend' | 'keyPrefix' | 'dataDir' | 'timeoutMs'>,
    during?: (workers: Worker<BackendWorkerLine>[]) => Promise<void>,
  ): Promise<Result[]> {
    const config: BackendWorkerConfig = {
      backend: backend.spec,
      keyPrefix: uniquePrefix(`${name}-${scenario.scenario}`),
      dataDir,
      timeoutMs,
      ttl: options.ttl ?? 10_000,
      waitTimeout: options.waitTimeout ?? 20_000,
      ...scenario,
    };
    const workers = Array.from({ length: processes }, () =>
      spawnWorker<BackendWorkerConfig, BackendWorkerLine>(config, 'backend-worker'),
    );
    try {
      await Promise.all(workers.map((w) => w.ready));
    } catch (err) {
      workers.forEach((w) => w.kill());
      await Promise.all(workers.map((w) => w.exited));
      throw err;
    }
    workers.forEach((w) => w.go());
    await during?.(workers);
    const results = await Promise.all(workers.map((w) => w.exited));
    expect(failures(results)).toEqual([]);
    return results;
  }

  const read = (file: string) => Number(fs.readFileSync(path.join(dataDir, file), 'utf8'));

  describe(`${name}: the scenarios every backend passes, across ${processes} OS processes`, () => {
    // Each scenario starts its processes (Nest apps) and waits for them; they end by themselves.
    jest.setTimeout(timeoutMs + 10_000);
    beforeAll(async () => {
      backend = await setup();
    });
    beforeEach(() => {
      dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'nest-locked-data-'));
    });
    afterEach(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    afterAll(async () => {
      await killWorkers();
      await backend?.stop();
    });

    it('mutual exclusion: no two sections of a key overlap, the counters end exact, fences rise in hold order', async () => {
      const names = ['a', 'b'];
      const results = await run({ scenario: 'counter', names, calls, delayMs: 2 });
      const holds = linesOf(results, 'hold');
      expect(holds).toHaveLength(processes * calls * names.length);
      expect(findOverlaps(holds)).toEqual([]);
      for (const n of names) expect(read(n)).toBe(processes * calls);
      for (const n of names) {
        const fences = holds
          .filter((h) => h.key === `counter:${n}`)
          .sort((x, y) => x.start - y.start)
          .map((h) => h.fence);
        const rising = fences.every((f, i) => i === 0 || f > fences[i - 1]);
        expect({ key: n, rising, fences }).toEqual({ key: n, rising: true, fences });
      }
    });

    it('reentrancy: a locked method calling itself on the same key re-enters without a deadlock', async () => {
      const results = await run({ scenario: 'reentrant', names: ['r'], calls: 3, delayMs: 1 });
      expect(linesOf(results, 'hold')).toHaveLength(processes * 3);
      expect(findOverlaps(linesOf(results, 'hold'))).toEqual([]);
      expect(read('r')).toBe(processes * 3);
    });

    it('nested: a bump started inside a hold and not awaited still runs under the lock', async () => {
      const results = await run({ scenario: 'nested', names: ['n'], calls: 3, delayMs: 20 });
      expect(linesOf(results, 'hold')).toHaveLength(processes * 3);
      expect(findOverlaps(linesOf(results, 'hold'))).toEqual([]);
      expect(read('n')).toBe(processes * 3);
    });

    // A backend without permits (MySQL) refuses them at startup: its own spec says so.
    if (options.permits !== false) {
      it('permits: 2**31 - 1 admits every caller at once, each with its own fence (the cost does not grow with N)', async () => {
        const results = await run({ scenario: 'permits', permits: 2 ** 31 - 1, calls: 3 });
        const holds = linesOf(results, 'hold');
        expect(holds).toHaveLength(processes * 3);
        expect(new Set(holds.map((h) => h.fence)).size).toBe(processes * 3);
      });
    }

    it('multi-key: transfers in opposite directions take both accounts all or nothing, no deadlock', async () => {
      const transfers = [
        { from: 'x', to: 'y', count: 3 },
        { from: 'y', to: 'x', count: 3 },
        { from: 'y', to: 'z', count: 2 },
      ];
      const results = await run({ scenario: 'transfer', transfers, delayMs: 1 });
      const holds = linesOf(results, 'hold');
      expect(holds).toHaveLength(processes * 8 * 2);
      expect(findOverlaps(holds)).toEqual([]);
      const balance = (a: string) =>
        fs.existsSync(path.join(dataDir, `account-${a}`)) ? read(`account-${a}`) : 0;
      expect({ x: balance('x'), y: balance('y'), z: balance('z') }).toEqual({
        x: 0,
        y: -2 * processes,
        z: 2 * processes,
      });
    });

    it('minHold: of every process asking for a tick at once, exactly one runs it', async () => {
      const ticks = 3;
      const seen = new Map<number, number>();
      const results = await run(
        { scenario: 'minHold', ticks, minHoldMs: 5_000 },
        async (workers) => {
          // The keys stay held until every worker has asked for every tick, then they close.
          await new Promise<void>((resolve) => {
            const check = () => {
              const done = workers.every(
                (w) => w.lines.filter((l) => l.type === 'tick').length === ticks,
              );
              if (done) resolve();
              return done;
            };
            if (!check()) workers.forEach((w) => w.onLine(() => void check()));
          });
          workers.forEach((w) => w.send('end'));
        },
      );
      for (const t of linesOf(results, 'tick'))
        if (t.ran) seen.set(t.tick, (seen.get(t.tick) ?? 0) + 1);
      expect([...Array(ticks).keys()].map((t) => seen.get(t) ?? 0)).toEqual(Array(ticks).fill(1));
    });

    it('segmented: every unit of every slice is sold once, no slice section overlaps', async () => {
      const segments = 4;
      const perSlice = 3;
      for (let s = 0; s < segments; s++)
        fs.writeFileSync(path.join(dataDir, `stock-sku-${s}`), String(perSlice));
      const results = await run({
        scenario: 'segmented',
        sku: 'sku',
        segments,
        calls: 4,
        delayMs: 1,
      });
      const sold = linesOf(results, 'sold');
      expect(sold).toHaveLength(segments * perSlice);
      expect(findOverlaps(linesOf(results, 'hold'))).toEqual([]);
      for (let s = 0; s < segments; s++) expect(read(`stock-sku-${s}`)).toBe(0);
      const others = linesOf(results, 'error').filter(
        (e) => e.name !== 'AllSegmentsExhaustedError',
      );
      expect(others).toEqual([]);
    });
  });
}
