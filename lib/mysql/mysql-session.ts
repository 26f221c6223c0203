import type { PoolConnection } from 'mysql2/promise';
import { ListeningSession } from '../sql/listening-session';

/** A pooled mysql2 connection held for one hold. @internal */
export class MysqlSession extends ListeningSession {
  constructor(
    readonly connection: PoolConnection,
    /** Told when the connection goes back (or is closed): the dialect counts those out. */
    private readonly returned: () => void,
  ) {
    super(connection.connection);
  }

  get id(): number {
    return this.connection.threadId;
  }

  protected giveBack(destroy: boolean): void {
    if (destroy) this.connection.destroy();
    else this.connection.release();
    this.returned();
  }
}
