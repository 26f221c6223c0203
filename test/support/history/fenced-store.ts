import type { FencedWrite, HistoryProcess } from 'nest-locked/testing';
import type { HistoryStoreOp, HistoryStoreReply } from '../../fixtures/history-worker';
import { now } from '../intervals';

/**
 * The data the history workers' sections guard, in the parent process (one place every worker
 * reaches, so it cannot itself be a source of overlaps): per key an unfenced counter, and a
 * fenced cell that refuses a fence below the highest it accepted. Every fenced write is
 * recorded for the checker.
 */
export class FencedStore {
  readonly writes: FencedWrite[] = [];
  private readonly counters = new Map<string, number>();
  private readonly highest = new Map<string, number>();
  /** Counter writes (one per section that got that far). */
  increments = 0;

  /** Answers one request of `process`. */
  answer(process: HistoryProcess, request: HistoryStoreOp & { id: number }): HistoryStoreReply {
    switch (request.op) {
      case 'read':
        return { id: request.id, value: this.counters.get(request.key) ?? 0 };
      case 'write':
        this.counters.set(request.key, request.value);
        this.increments++;
        return { id: request.id };
      case 'fenced': {
        const { key, fence, call } = request;
        const accepted = fence >= (this.highest.get(key) ?? -Infinity);
        if (accepted) this.highest.set(key, fence);
        this.writes.push({ process, call, key, fence, at: now(), accepted });
        return { id: request.id, accepted };
      }
    }
  }

  /** The sum of every key's counter. */
  get value(): number {
    let sum = 0;
    for (const v of this.counters.values()) sum += v;
    return sum;
  }
}
