import type { PoolConnection } from 'mysql2/promise';
import type { SqlSession } from '../sql/sql-dialect';

const ENDED = new Error('the connection ended');

/** A pooled mysql2 connection held for one hold. @internal */
export class MysqlSession implements SqlSession {
  private listener?: (cause: Error) => void;
  private released = false;

  constructor(
    readonly connection: PoolConnection,
    /** Told when the connection goes back (or is closed): the dialect counts those out. */
    private readonly returned: () => void,
  ) {
    connection.connection.on('error', this.onError);
    connection.connection.on('end', this.onEnd);
  }

  get id(): number {
    return this.connection.threadId;
  }

  watch(listener: (cause: Error) => void): void {
    this.listener = listener;
  }

  release(destroy: boolean): void {
    if (this.released) return;
    this.released = true;
    this.listener = undefined;
    this.connection.connection.off('error', this.onError);
    this.connection.connection.off('end', this.onEnd);
    if (destroy) this.connection.destroy();
    else this.connection.release();
    this.returned();
  }

  private readonly onError = (error: Error): void => this.listener?.(error);
  private readonly onEnd = (): void => this.listener?.(ENDED);
}
