import type { BoardPublishedEvent, BoardViewStore } from '../core/board-source';

/** The statements of the board's table on one database (its placeholders, its upsert). */
export interface SqlBoardStatements {
  /** Creates the table if it is missing. */
  readonly create: string;
  /** (group, id, expires at ms, body): inserts or replaces an instance's row. */
  readonly upsert: string;
  /** (group, now ms): the id and body of each live instance row (id and body columns). */
  readonly live: string;
  /** (group, now ms): a row when a page is open (the row of id '' lives). */
  readonly watched: string;
  /** (group, id): deletes a row. */
  readonly remove: string;
}

/** One query on the pool: its rows. */
export type SqlBoardQuery = (
  sql: string,
  values: readonly unknown[],
) => Promise<Array<Record<string, unknown>>>;

/** The table every SQL backend keeps the board's views in (one row per instance and group). */
export const BOARD_TABLE = 'nest_locked_board';

/** The id of the row that marks a page open (an instance id is never empty). */
const WATCHED = '';

/**
 * The instances' views of a SQL group, in the table `nest_locked_board` (created on the first
 * publish when missing; a role that may not create it makes publishing fail, warned once, and
 * the page shows this instance's view only): one row per instance with its expiry, and a row
 * that marks a page open.
 * @internal
 */
export class SqlBoardViews implements BoardViewStore {
  private created?: Promise<unknown>;

  constructor(
    private readonly query: SqlBoardQuery,
    private readonly statements: SqlBoardStatements,
    /** The module's keyPrefix and the group's name: the rows of this group. */
    private readonly group: string,
  ) {}

  async publish(
    id: string,
    view: string,
    _events: readonly BoardPublishedEvent[],
    expiry: number,
  ): Promise<boolean> {
    this.created ??= this.query(this.statements.create, []).catch((error: unknown) => {
      this.created = undefined;
      throw error;
    });
    await this.created;
    const now = Date.now();
    await this.query(this.statements.upsert, [this.group, id, now + expiry, view]);
    const watched = await this.query(this.statements.watched, [this.group, now]);
    return watched.length > 0;
  }

  async watch(ms: number): Promise<void> {
    await this.query(this.statements.upsert, [this.group, WATCHED, Date.now() + ms, '']);
  }

  async withdraw(id: string): Promise<void> {
    await this.query(this.statements.remove, [this.group, id]);
  }

  async views(): Promise<string[]> {
    const rows = await this.query(this.statements.live, [this.group, Date.now()]);
    return rows.filter((r) => r.id !== WATCHED).map((r) => String(r.body));
  }
}
