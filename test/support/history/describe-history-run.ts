import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describeFenceViolation, describeOverlap } from 'nest-locked/testing';
import type { PlannedFaultKind } from './fault-schedule';
import { runHistory } from './history-run';
import { type HistoryBackendName, type HistoryTarget, startTarget } from './history-targets';

export interface ShortRun {
  readonly seed: number;
  readonly durationMs: number;
  /** The faults of this run: the seed and duration are chosen so that each happens. */
  readonly kinds: readonly PlannedFaultKind[];
  /** Redis quorum nodes, etcd or ZooKeeper members (the target's default otherwise). */
  readonly members?: number;
}

/**
 * The short seeded history of one backend in `npm test` (test/faults/history-*.spec.ts): its
 * servers started once, one run, and the checker's verdict: no second holder within a valid
 * lease, fences unique and rising in real-time order, no stale write accepted.
 */
export function describeHistoryRun(name: HistoryBackendName, run: ShortRun): void {
  describe(`history on ${name} (seed ${run.seed}, ${run.kinds.join(', ')})`, () => {
    let target: HistoryTarget | undefined;

    beforeAll(async () => {
      target = await startTarget(name, { members: run.members });
    }, 120_000);
    afterAll(() => target?.stop());

    it('has no second holder within a valid lease, fences in order and no stale write accepted', async () => {
      const result = await runHistory(target!, run);
      const r = result.report;
      if (r.unexplained.length + r.fenceViolations.length + result.crashes.length > 0) {
        // The whole history, for a reader to find what happened around the failure.
        const file = path.join(
          os.tmpdir(),
          `nest-locked-history-${name}-${run.seed}-${process.pid}.json`,
        );
        fs.writeFileSync(file, JSON.stringify({ ...result, report: undefined }));
        process.stdout.write(`[history] ${name}: the history is in ${file}\n`);
      }
      process.stdout.write(
        `[history] ${name} seed ${run.seed}: ${r.holds} holds, ${r.explained} overlaps explained, ` +
          `${r.writesRefused} writes refused, ${r.lostIncrements} lost increments, ` +
          `longest unavailability ${r.longestUnavailability?.ms.toFixed(0)} ms, ` +
          `${Math.round(result.ms)} ms\n`,
      );
      // Every planned fault happened (the seed and duration were chosen for it).
      expect([...new Set(result.schedule.map((f) => f.kind))].sort()).toEqual(
        [...run.kinds].sort(),
      );
      expect(result.injectFailures).toEqual([]);
      expect(r.holds).toBeGreaterThan(10);
      expect(r.malformed).toEqual([]);
      expect(r.unexplained.map(describeOverlap)).toEqual([]);
      expect(r.fenceViolations.map(describeFenceViolation)).toEqual([]);
      expect(r.staleWritesAccepted).toEqual([]);
      expect(result.crashes).toEqual([]);
    }, 120_000);
  });
}
