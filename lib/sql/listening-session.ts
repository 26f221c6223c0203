import type { EventEmitter } from 'node:events';
import type { SqlSession } from './sql-dialect';

const ENDED = new Error('the connection ended');

/**
 * A pooled connection held for one hold, listening to its connection from checkout to release:
 * an error or end while it is out is the session lost. (A checked-out driver connection
 * without an `error` listener would end the process when it fails.)
 * @internal
 */
export abstract class ListeningSession implements SqlSession {
  abstract readonly id: number;
  private listener?: (cause: Error) => void;
  private released = false;

  constructor(private readonly events: EventEmitter) {
    events.on('error', this.onError);
    events.on('end', this.onEnd);
  }

  watch(listener: (cause: Error) => void): void {
    this.listener = listener;
  }

  release(destroy: boolean): void {
    if (this.released) return;
    this.released = true;
    this.listener = undefined;
    this.events.off('error', this.onError);
    this.events.off('end', this.onEnd);
    this.giveBack(destroy);
  }

  /** Back to the pool, or closed (`destroy`: its session locks go with it on the server). */
  protected abstract giveBack(destroy: boolean): void;

  private readonly onError = (error: Error): void => this.listener?.(error);
  private readonly onEnd = (): void => this.listener?.(ENDED);
}
