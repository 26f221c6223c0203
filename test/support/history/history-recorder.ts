import type { HistoryEvent, HistoryFault } from 'nest-locked/testing';
import type { HistoryWorkerLine } from '../../fixtures/history-worker';
import { FencedStore } from './fenced-store';

/**
 * What a history run hears from its workers: their steps (the history), the pauses they
 * measured (as freezes), their store requests (answered by the fenced store) and their errors;
 * and who holds a lock right now, for the faults that hit a holder.
 */
export class HistoryRecorder {
  readonly store = new FencedStore();
  readonly events: HistoryEvent[] = [];
  readonly faults: HistoryFault[] = [];
  /** Failed calls by error name. */
  readonly errors: Record<string, number> = {};
  /** Open holds per worker pid. */
  private readonly holding = new Map<number, number>();

  /** Records one line of worker `pid`; returns the answer to send it, if the line asks one. */
  hear(pid: number, line: HistoryWorkerLine): string | undefined {
    switch (line.type) {
      case 'step': {
        const { call, key, step, at, fence } = line;
        this.events.push({ process: pid, call, key, step, at, fence });
        const open = this.holding.get(pid) ?? 0;
        if (step === 'acquire-ok') this.holding.set(pid, open + 1);
        if (step === 'release-invoke') this.holding.set(pid, open - 1);
        return undefined;
      }
      case 'store':
        return JSON.stringify(this.store.answer(pid, line));
      case 'pause': {
        const { from, to } = line;
        this.faults.push({ kind: 'process-frozen', process: pid, from, to, source: 'measured' });
        return undefined;
      }
      case 'error':
        this.errors[line.name] = (this.errors[line.name] ?? 0) + 1;
        return undefined;
      default:
        return undefined;
    }
  }

  /** Whether worker `pid` holds a lock now. */
  holds(pid: number): boolean {
    return (this.holding.get(pid) ?? 0) > 0;
  }

  /** Worker `pid` is gone: it holds nothing any more. */
  gone(pid: number): void {
    this.holding.delete(pid);
  }
}
