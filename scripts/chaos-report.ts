import type { ChaosSaleResult } from './chaos-sale';
import { FAULT_KINDS, type FaultKind } from './chaos-schedule';
import { formatTable } from './demo-progress';

/** The chaos demo's table and sentences, from the rows' results. */

const ms = (n: number): string => `${Math.round(n)} ms`;
const plural = (n: number, word: string): string => `${n} ${word}${n === 1 ? '' : 's'}`;

/** The faults that leave a holder running with a lost lock, and when it can first learn it. */
const TOLD_AFTER: Partial<Record<FaultKind, string>> = {
  stall: 'told after SIGCONT',
  'redis-restart': 'told after restart',
};

/** The holders a fault left running with a lost lock, and how many of them were told. */
function survivors(r: ChaosSaleResult): { all: number; told: number } {
  const left = r.faults.filter((f) => TOLD_AFTER[f.kind]);
  return { all: left.length, told: left.filter((f) => f.learnedMs !== undefined).length };
}

/** The chaos table, one row per write: what was sold, the late writes, who was told how soon. */
export function chaosTable(rows: readonly ChaosSaleResult[]): string[] {
  const kinds = FAULT_KINDS.filter(
    (k) => TOLD_AFTER[k] && rows.some((r) => r.faults.some((f) => f.kind === k)),
  );
  const head = ['row', 'sold', 'final stock', 'oversold', 'late writes', 'told lost'];
  head.push(...kinds.map((k) => TOLD_AFTER[k]!));
  const cells = rows.map((r) => {
    const { all, told } = survivors(r);
    const late =
      r.row.mode === 'fenced'
        ? `${r.staleRejected} rejected${r.staleApplied ? `, ${r.staleApplied} applied` : ''}`
        : `${r.staleApplied} applied`;
    const soon = kinds.map((k) => {
      const f = r.faults.find((x) => x.kind === k);
      return f?.learnedMs === undefined ? '-' : ms(f.learnedMs);
    });
    const cells = [r.row.label, String(r.sold), String(r.finalStock), String(r.oversold), late];
    return [...cells, `${told} of ${all}`, ...soon];
  });
  return formatTable(head, cells);
}

/** What a row's figures mean. */
export interface ChaosVerdict {
  readonly text: string;
  /** `false`: the fenced row let a stale write through or sold the wrong amount. */
  readonly ok: boolean;
  /** Drawn red: the failure the row shows. */
  readonly bad: boolean;
}

export function chaosVerdicts(rows: readonly ChaosSaleResult[]): ChaosVerdict[] {
  return rows.map((r) => {
    if (r.row.mode !== 'fenced') {
      const { all, told } = survivors(r);
      const damage =
        r.phantom > 0
          ? `${r.sold} sold from a stock of ${r.stock}, ${r.finalStock} left: ` +
            `${plural(r.staleApplied, 'late write')} put back a stock read before newer sales, ` +
            `so ${plural(r.phantom, 'unit')} sold twice`
          : `${r.sold} sold, ${r.finalStock} left: ${plural(r.staleApplied, 'late write')} ` +
            'landed after newer ones, without visible damage this time';
      const text =
        `lock only: ${damage}. ${told} of ${all} holders were told they lost the lock ` +
        '(signal, `lost` event), but a write that ignores the fence lands anyway.';
      return { text, ok: true, bad: true };
    }
    const ok = r.sold === r.stock && r.finalStock === 0 && r.staleApplied === 0;
    const text = ok
      ? `lock + fenced write: exactly ${r.sold} sold, stock 0: the database refused ` +
        `${plural(r.staleRejected, 'late write')} (409 STALE_FENCE: nothing sold, the buyer ` +
        'bought again).'
      : `lock + fenced write: ${r.sold} sold, ${r.finalStock} left, ` +
        `${plural(r.staleApplied, 'stale write')} applied: the fenced write did not hold.`;
    return { text, ok, bad: !ok };
  });
}

/** `text` cut at spaces into lines of at most `width`, the next ones indented by `indent`. */
export function wrap(text: string, width: number, indent = '  '): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line);
      line = indent + word;
    } else line = line ? `${line} ${word}` : word;
  }
  return line ? [...lines, line] : lines;
}
