import type { FenceViolation, HistoryReport, Hold, Overlap } from './history.types';

/** One row of the table `historyTable` prints, named by what was run. */
export interface HistoryRow {
  readonly name: string;
  readonly report: HistoryReport;
}

const COLUMNS = [
  'run',
  'holds',
  'overlaps expl.',
  'unexpl.',
  'fence viol.',
  'stale acc.',
  'writes refused',
  'lost incr.',
  'longest unavail. ms',
] as const;

/**
 * The reports as a plain-text table: holds, overlaps explained and unexplained, fence
 * violations, stale writes accepted, writes refused, lost increments, longest unavailability.
 */
export function historyTable(rows: readonly HistoryRow[]): string {
  const cells = rows.map(({ name, report: r }) => [
    name,
    String(r.holds),
    String(r.explained),
    String(r.unexplained.length),
    String(r.fenceViolations.length),
    String(r.staleWritesAccepted.length),
    String(r.writesRefused),
    r.lostIncrements === undefined ? '-' : String(r.lostIncrements),
    r.longestUnavailability ? r.longestUnavailability.ms.toFixed(0) : '-',
  ]);
  const widths = COLUMNS.map((c, i) => Math.max(c.length, ...cells.map((row) => row[i].length)));
  const line = (row: readonly string[]) =>
    row.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]) : cell.padStart(widths[i]))).join('  ');
  return [line(COLUMNS), ...cells.map(line)].join('\n');
}

const hold = (h: Hold) =>
  `${h.process}#${h.call} [${h.start.toFixed(3)}, ${h.end.toFixed(3)}] fence ${h.fence ?? '?'}` +
  (h.lostAt === undefined ? '' : ` told lost at ${h.lostAt.toFixed(3)}`);

/** An overlap in one line: its key, class, both holds and the fault that explains it. */
export function describeOverlap(o: Overlap): string {
  const fault = o.fault
    ? ` (${o.fault.kind} ${o.fault.from.toFixed(3)}-${o.fault.to.toFixed(3)})`
    : '';
  return `${o.key}: ${o.class}${fault}, ${(o.to - o.from).toFixed(3)} ms: ${hold(o.first)} / ${hold(o.second)}`;
}

/** A fence violation in one line. */
export function describeFenceViolation(v: FenceViolation): string {
  return `${v.key}: ${hold(v.later)} after ${hold(v.earlier)}`;
}
