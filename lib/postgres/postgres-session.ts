import type { PoolClient } from 'pg';
import { ListeningSession } from '../sql/listening-session';

/** A pooled pg connection held for one hold. @internal */
export class PostgresSession extends ListeningSession {
  constructor(readonly client: PoolClient) {
    super(client);
  }

  /** The backend pid (BackendKeyData, read by pg at connect; not in its typings). */
  get id(): number {
    return (this.client as PoolClient & { processID?: number }).processID ?? 0;
  }

  protected giveBack(destroy: boolean): void {
    // pg closes a client released with an error (true) instead of pooling it.
    this.client.release(destroy || undefined);
  }
}
