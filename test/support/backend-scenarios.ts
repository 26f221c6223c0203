import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type {
  BackendScenario,
  BackendSpec,
  BackendWorkerConfig,
  BackendWorkerLine,
} from '../fixtures/backend-worker';
import { findOverlaps } from './intervals';
import { uniquePrefix, within } from './lock-app';
import { killWorkers, spawnWorker, type Worker, type WorkerResult } from './workers';

/**
 * The scenarios every backend must pass, across OS processes (PRODUCT 5): one `describe` block
 * that a backend's spec file calls with a way to start its server. `processes` workers of
 * `test/fixtures/backend-worker.ts` start once for the file (a Nest app's boot is most of a
 * scenario's time) and run each scenario at once over the backend; the test checks what they
 * report with an independent checker (`findOverlaps`) and the data they guarded (files: a read,
 * a wait, a write, so a missing lock loses updates).
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
  /** Limit of one scenario, in ms. @default 60_000 */
  timeoutMs?: number;
  /** Whether the backend has permits (MySQL has not). @default true */
  permits?: boolean;
}

/** The workers' decorator options (fixed at their start): permits, minHold, slices. */
const PERMITS = 2 ** 31 - 1;
const MIN_HOLD_MS = 5_000;
const SEGMENTS = 4;

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
  /** The file's workers, up once the first scenario needs them (again after one died). */
  let workers: Worker<BackendWorkerLine>[] = [];

  const exited = new WeakSet<Worker<BackendWorkerLine>>();

  async function startWorkers(): Promise<void> {
    await killWorkers();
    const config: BackendWorkerConfig = {
      backend: backend.spec,
      keyPrefix: uniquePrefix(name),
      // The workers' whole life: every scenario of the file (each one is bounded below).
      timeoutMs: timeoutMs * 10,
      ttl: options.ttl ?? 10_000,
      waitTimeout: options.waitTimeout ?? 20_000,
      // A backend without permits refuses a `@Locked` with them at startup.
      permits: options.permits === false ? undefined : PERMITS,
      minHoldMs: MIN_HOLD_MS,
      segments: SEGMENTS,
    };
    workers = Array.from({ length: processes }, () =>
      spawnWorker<BackendWorkerConfig, BackendWorkerLine>(config, 'backend-worker'),
    );
    workers.forEach((w) => void w.exited.then(() => exited.add(w)));
    await Promise.all(workers.map((w) => w.ready));
  }

  /** Runs the scenario in every worker at once and waits until each one is done with it. */
  async function run(
    scenario: Omit<BackendScenario, 'dataDir'>,
    during?: (workers: Worker<BackendWorkerLine>[]) => Promise<void>,
  ): Promise<Result[]> {
    if (workers.length === 0 || workers.some((w) => exited.has(w))) await startWorkers();
    const from = workers.map((w) => w.lines.length);
    const done = workers.map(
      (w, i) =>
        new Promise<Result>((resolve) => {
          const result = (code: number | null, signal: NodeJS.Signals | null, other = '') => ({
            lines: w.lines.slice(from[i]),
            code,
            signal,
            other,
          });
          w.onLine((line) => line.type === 'done' && resolve(result(0, null)));
          void w.exited.then((r) =>
            resolve(result(-1, r.signal, `exited (${r.code ?? r.signal}) before done: ${r.other}`)),
          );
        }),
    );
    const line = JSON.stringify({ run: { ...scenario, dataDir } });
    workers.forEach((w) => w.send(line));
    await during?.(workers);
    const results = await within(Promise.all(done), timeoutMs, `the ${scenario.scenario} scenario`);
    expect(failures(results)).toEqual([]);
    return results;
  }

  const read = (file: string) => Number(fs.readFileSync(path.join(dataDir, file), 'utf8'));

  describe(`${name}: the scenarios every backend passes, across ${processes} OS processes`, () => {
    // A scenario (the first one starts the workers) is bounded by `timeoutMs`.
    jest.setTimeout(timeoutMs + 10_000);
    beforeAll(async () => {
      backend = await setup();
    }, timeoutMs);
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
        const results = await run({ scenario: 'permits', calls: 3 });
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
      const results = await run({ scenario: 'minHold', ticks }, async (workers) => {
        // The keys stay held until every worker has asked for every tick, then they are done.
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
      });
      for (const t of linesOf(results, 'tick'))
        if (t.ran) seen.set(t.tick, (seen.get(t.tick) ?? 0) + 1);
      expect([...Array(ticks).keys()].map((t) => seen.get(t) ?? 0)).toEqual(Array(ticks).fill(1));
    });

    it('segmented: every unit of every slice is sold once, no slice section overlaps', async () => {
      const segments = SEGMENTS;
      const perSlice = 3;
      for (let s = 0; s < segments; s++)
        fs.writeFileSync(path.join(dataDir, `stock-sku-${s}`), String(perSlice));
      const results = await run({
        scenario: 'segmented',
        sku: 'sku',
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
