import type { PoolClient } from 'pg';
import type { SqlSession } from '../sql/sql-dialect';

const ENDED = new Error('the connection ended');

/**
 * A pooled pg connection held for one hold. It listens for errors from checkout to release: a
 * checked-out pg client without an `error` listener would crash the process when its
 * connection fails.
 * @internal
 */
export class PostgresSession implements SqlSession {
  private listener?: (cause: Error) => void;
  private released = false;

  constructor(readonly client: PoolClient) {
    client.on('error', this.onError);
    client.on('end', this.onEnd);
  }

  /** The backend pid (BackendKeyData, read by pg at connect; not in its typings). */
  get id(): number {
    return (this.client as PoolClient & { processID?: number }).processID ?? 0;
  }

  watch(listener: (cause: Error) => void): void {
    this.listener = listener;
  }

  release(destroy: boolean): void {
    if (this.released) return;
    this.released = true;
    this.listener = undefined;
    this.client.off('error', this.onError);
    this.client.off('end', this.onEnd);
    // pg closes a client released with an error (true) instead of pooling it.
    this.client.release(destroy || undefined);
  }

  private readonly onError = (error: Error): void => this.listener?.(error);
  private readonly onEnd = (): void => this.listener?.(ENDED);
}
