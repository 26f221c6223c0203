/**
 * The shared-hold scenarios of the report (read-heavy and permits): their targets (PRODUCT.md
 * section 4), the figures derived from the summaries and their markdown.
 */
import { PERMITS, type PeerName, TOPOLOGIES } from './protocol';
import { readHeavyCeiling } from './rw-ideal';
import type { CaseSummary, Options } from './run';
import { fmt, oneLine, pf, range, tableSection, topCommands } from './report-format';

export const SHARED_TARGETS = {
  /** Read-heavy (95% reads): read holds vs the exclusive lock, same load. */
  readHeavySpeedup: 10,
  /** `permits: 5`: sections/s over the ideal PERMITS / (section + handoff). */
  permitsVsIdeal: 0.9,
};

export interface ReadHeavyFigures {
  exclusive: number;
  shared: number;
  speedup: number;
  pass?: boolean;
  /**
   * The largest speedup the lock's rules allow for the same callers and draws, with no cost per
   * handoff (`readHeavyCeiling`), over the exclusive lock's own ceiling (1 section at a time).
   */
  ceiling: number;
  /** p99 wait of the writes (median over runs), with read holds and with the exclusive lock. */
  writerP99Shared: number;
  writerP99Exclusive: number;
}

export interface PermitsFigures {
  ideal: number;
  vsIdeal: number;
  pass?: boolean;
  /** The most holders at once seen in any run (must not exceed PERMITS). */
  maxConcurrent: number;
}

export interface SharedHoldsDerived {
  readHeavy: Record<string, ReadHeavyFigures>;
  permits: Record<string, PermitsFigures>;
}

const failed = (s: CaseSummary) => {
  const total = Object.values(s.failures).reduce((a, b) => a + b, 0);
  return total ? `${fmt(total / Math.max(1, s.n), 1)} / ${s.attemptsPerRun} per run` : '0';
};
const errorCell = (s: CaseSummary) =>
  oneLine(s.skipped ? `skipped: ${s.skipped}` : `error: ${s.errors[0] ?? 'unknown'}`);

/** `floorIdeal`: 1 / (section + handoff), the raw floor with 1 worker, sections/s. */
export function deriveSharedHolds(
  summaries: readonly CaseSummary[],
  floorIdeal: number,
): SharedHoldsDerived {
  const by = (id: string) => summaries.find((s) => s.def.id === id && s.n > 0);
  const d: SharedHoldsDerived = { readHeavy: {}, permits: {} };
  for (const topo of TOPOLOGIES.map(([procs, callers]) => `${procs}x${callers}`)) {
    const exclusive = by(`readheavy:${topo}:ours-locked`);
    const shared = by(`readheavy:${topo}:ours-rw`);
    if (exclusive && shared) {
      const speedup = shared.rate.median / exclusive.rate.median;
      const { procs, spec } = shared.def;
      d.readHeavy[topo] = {
        exclusive: exclusive.rate.median,
        shared: shared.rate.median,
        speedup,
        ceiling: readHeavyCeiling(procs, spec.concurrency, spec.iterations, spec.writeShare ?? 0),
        pass: Number.isFinite(speedup) ? speedup >= SHARED_TARGETS.readHeavySpeedup : undefined,
        writerP99Shared: shared.writeWaitP99,
        writerP99Exclusive: exclusive.writeWaitP99,
      };
    }
  }
  const ideal = PERMITS * floorIdeal;
  for (const s of summaries) {
    if (s.def.scenario !== 'permits' || s.n === 0) continue;
    const vsIdeal = s.rate.median / ideal;
    d.permits[s.def.id] = {
      ideal,
      vsIdeal,
      pass: Number.isFinite(vsIdeal) ? vsIdeal >= SHARED_TARGETS.permitsVsIdeal : undefined,
      maxConcurrent: s.maxConcurrent,
    };
  }
  return d;
}

/** Rows of the targets table. */
export function sharedHoldsTargetRows(
  summaries: readonly CaseSummary[],
  d: SharedHoldsDerived,
): string[] {
  const rows: string[] = [];
  for (const [topo, r] of Object.entries(d.readHeavy)) {
    rows.push(
      `| read-heavy ${topo} (95% reads): \`mode: 'read'\` >= ${SHARED_TARGETS.readHeavySpeedup} x the exclusive lock | ` +
        `${fmt(r.speedup, 2)} x (${fmt(r.shared)} vs ${fmt(r.exclusive)} sections/s; the rules' ceiling for these draws, no cost per handoff: ${fmt(r.ceiling, 2)} x; writer p99 ${fmt(r.writerP99Shared, 1)} vs ${fmt(r.writerP99Exclusive, 1)} ms) | ${pf(r.pass)} |`,
    );
  }
  for (const topo of TOPOLOGIES.map(([procs, callers]) => `${procs}x${callers}`)) {
    const id = `permits:${topo}:ours-permits5`;
    const p = d.permits[id];
    const s = summaries.find((x) => x.def.id === id);
    if (!p || !s) continue;
    rows.push(
      `| permits: ${PERMITS}, ${topo}: >= ${SHARED_TARGETS.permitsVsIdeal} x ${PERMITS} / (section + handoff) | ` +
        `${fmt(p.vsIdeal, 2)} x (${fmt(s.rate.median)} vs ${fmt(p.ideal)}/s; at most ${fmt(p.maxConcurrent)} holders at once) | ${pf(p.pass)} |`,
    );
  }
  return rows;
}

const LABEL: Partial<Record<PeerName, string>> = {
  'ours-locked': '**ours: exclusive `@Locked`** for reads and writes',
  'ours-rw': "**ours: `mode: 'read'`** reads, `mode: 'write'` writes",
  'ours-permits5': `**ours: \`@Locked\` permits: ${PERMITS}**`,
  semaphore5: `redis-semaphore Semaphore(${PERMITS}), defaults`,
};

/** The read-heavy and permits sections of latest.md (nothing when neither ran). */
export function sharedHoldsMarkdown(
  summaries: readonly CaseSummary[],
  d: SharedHoldsDerived,
  o: Options,
): string[] {
  const L: string[] = [];
  const rw = summaries.filter((s) => s.def.scenario === 'readheavy');
  if (rw.length) {
    L.push(
      ...tableSection(
        'Read-heavy: read holds vs the exclusive lock, same load',
        'One key, 1 ms section; each caller draws 5% writes and 95% reads from a fixed seed (the ' +
          'same calls for both peers). Exclusive: every call takes the exclusive lock ' +
          `(${o.hotIterations} iterations per caller); read holds: reads \`mode: 'read'\`, writes ` +
          `\`mode: 'write'\` on the same key (${o.rwIterations} iterations per caller, so both runs ` +
          'last about as long). Writer wait: from the call to entering the section, writes only. ' +
          'Overlaps: writes that overlapped any other section (reads may overlap each other). ' +
          "Ceiling: the speedup the lock's rules (PRODUCT.md 2.7: one arrival order, a waiting " +
          'writer ahead of later readers, readers at the head granted together) allow for the ' +
          'same callers and draws if every section took exactly its length and every handoff ' +
          "nothing (`bench/rw-ideal.ts`), over the exclusive lock's (one section at a time); " +
          'x ceiling: the speedup over it.',
        [
          'config',
          'peer',
          'sections/s',
          'speedup',
          '>= 10x',
          'ceiling',
          'x ceiling',
          'wait p50 ms',
          'wait p99 ms',
          'writer wait p99 ms',
          'writes per run',
          'client cmds/section',
          'client / redis CPU µs per section',
          'failed acquires',
          'overlaps',
          'n',
        ],
      ),
    );
    for (const s of rw) {
      const label = LABEL[s.def.peer] ?? s.def.peer;
      if (s.n === 0) {
        L.push(`| ${s.def.config} | ${label} | ${errorCell(s)} |${' |'.repeat(12)} 0 |`);
        continue;
      }
      const f = d.readHeavy[s.def.config];
      const isShared = s.def.peer === 'ours-rw';
      L.push(
        `| ${s.def.config} | ${label} | ${range(s.rate)} | ${isShared && f ? fmt(f.speedup, 2) : '-'} | ${isShared && f ? pf(f.pass) : '-'} | ${isShared && f ? fmt(f.ceiling, 2) : '-'} | ${isShared && f ? fmt(f.speedup / f.ceiling, 2) : '-'} | ${fmt(s.waitP50, 2)} | ${range(s.waitP99, 1)} | ${fmt(s.writeWaitP99, 1)} | ${fmt(s.writes)} | ${fmt(s.clientPerOp, 2)} (${topCommands(s.clientByCommand, 4)}) | ${fmt(s.clientCpuPerOp, 0)} / ${fmt(s.serverCpuPerOp, 0)} | ${failed(s)} | ${s.overlaps} | ${s.n} |`,
      );
    }
  }
  const permits = summaries.filter((s) => s.def.scenario === 'permits');
  if (permits.length) {
    const ideal = Object.values(d.permits)[0]?.ideal;
    L.push('', `## Permits: at most ${PERMITS} holders of one key`, '');
    L.push(
      `One key, 1 ms section, every caller in a loop. x ideal = sections/s / ${fmt(ideal)} ` +
        `(${PERMITS} / (section + one handoff), the handoff from the raw floor's serial run). ` +
        `Ours: \`@Locked('{key}', { permits: ${PERMITS} })\` (${o.permitIterations} iterations ` +
        `per caller); redis-semaphore: \`new Semaphore(client, key, ${PERMITS})\` per call with ` +
        `its defaults (retries every 10 ms; ${o.hotIterations} iterations per caller). Holders ` +
        'at once: the most sections in progress together in any run (from their timestamps on ' +
        'the shared monotonic clock).',
      '',
    );
    L.push(
      '| config | peer | sections/s | x ideal | >= 0.9 | wait p50 ms | wait p99 ms | wait max ms | client cmds/section | server cmds/section | client / redis CPU µs per section | holders at once | failed acquires | n |',
      '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
    );
    for (const s of permits) {
      const label = LABEL[s.def.peer] ?? s.def.peer;
      if (s.n === 0) {
        L.push(`| ${s.def.config} | ${label} | ${errorCell(s)} |${' |'.repeat(10)} 0 |`);
        continue;
      }
      const p = d.permits[s.def.id];
      const ours = s.def.peer === 'ours-permits5';
      L.push(
        `| ${s.def.config} | ${label} | ${range(s.rate)} | ${fmt(p?.vsIdeal, 2)} | ${ours ? pf(p?.pass) : '-'} | ${fmt(s.waitP50, 2)} | ${range(s.waitP99, 1)} | ${fmt(s.waitMax, 0)} | ${fmt(s.clientPerOp, 2)} (${topCommands(s.clientByCommand, 4)}) | ${fmt(s.serverPerOp, 1)} | ${fmt(s.clientCpuPerOp, 0)} / ${fmt(s.serverCpuPerOp, 0)} | ${fmt(s.maxConcurrent)} | ${failed(s)} | ${s.n} |`,
      );
    }
  }
  return L;
}
