import { performance } from 'node:perf_hooks';
import type { BurstResult } from './http';

/** Printing helpers shared by the demo's scenarios. */

export const say = (line = '') => process.stdout.write(`${line}\n`);
const tty = process.stdout.isTTY === true;

/** Nearest-rank percentile of sorted values (0 for none). */
export const percentile = (sorted: readonly number[], p: number): number =>
  sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] : 0;

/**
 * A progress line while a burst runs, with a count per HTTP status: redrawn in place on a
 * terminal, in quarters otherwise.
 */
export class Progress {
  private readonly startedAt = performance.now();
  private readonly byStatus = new Map<number, number>();
  private lastDraw = 0;
  private lastQuarter = 0;

  constructor(
    private readonly label: string,
    private readonly total: number,
  ) {
    if (tty) this.draw(0);
  }

  update(done: number, r: BurstResult): void {
    this.byStatus.set(r.status, (this.byStatus.get(r.status) ?? 0) + 1);
    const now = performance.now();
    if (tty) {
      if (now - this.lastDraw > 50 || done === this.total) this.draw(done);
    } else {
      const quarter = Math.floor((done / this.total) * 4);
      if (quarter > this.lastQuarter && done < this.total) {
        this.lastQuarter = quarter;
        say(`  ${this.label.padEnd(10)} ${this.counts(done)}`);
      }
    }
  }

  end(): void {
    if (tty) process.stdout.write('\r\x1b[2K');
    say(`  ${this.label.padEnd(10)} ${this.counts(this.total)}  done`);
  }

  private counts(done: number): string {
    const s = ((performance.now() - this.startedAt) / 1000).toFixed(1);
    const statuses = [...this.byStatus.entries()]
      .sort((a, b) => a[0] - b[0])
      .map(([status, n]) => `${status || 'error'} ${n}`)
      .join('  ');
    return `${String(done).padStart(5)}/${this.total}  ${statuses}  ${s} s`;
  }

  private draw(done: number): void {
    this.lastDraw = performance.now();
    const width = 24;
    const filled = Math.round((done / this.total) * width);
    const bar = '#'.repeat(filled) + '.'.repeat(width - filled);
    process.stdout.write(`\r\x1b[2K  ${this.label.padEnd(10)} [${bar}] ${this.counts(done)}`);
  }
}

/** Columns padded to their widest cell, the first left-aligned, the others right-aligned. */
export function formatTable(head: readonly string[], rows: readonly string[][]): string[] {
  const widths = head.map((h, c) => Math.max(h.length, ...rows.map((row) => row[c].length)));
  const line = (row: readonly string[]) =>
    row.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]) : cell.padStart(widths[c]))).join('  ');
  return [line(head), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)];
}
