/**
 * What the lock board (`nest-locked/board`) reads of one group's lock server, and where the
 * instances publish what only they know. Each backend folder provides its own
 * (`LockBackend.boardSource`); nothing of it is built unless the board is imported.
 */

/** How a key is held or waited for. */
export type BoardMode = 'exclusive' | 'read' | `permits ${number}`;

/** One holder of a key, as the lock server tells it. */
export interface BoardHolder {
  /**
   * What names the holder's process on the server (a Redis token prefix, an etcd session, a
   * ZooKeeper token prefix, a PostgreSQL `application_name`): the instance whose published
   * `owner` is the same holds it. null when the server does not tell.
   */
  readonly owner: string | null;
  /** The holder's token as the server keeps it (matched with the holder's published hold). */
  readonly token?: string;
  /** The fence, where the server stores it. */
  readonly fence?: number;
  /** When the hold started, epoch ms on the server's clock, where the server stores it. */
  readonly since?: number;
  /**
   * What the backend's force release needs to find this hold on the server (a PostgreSQL pid
   * and lock id, a MySQL connection and lock name, a znode's path); opaque to the board.
   */
  readonly session?: string;
}

/** A held key as the server tells it. */
export interface BoardHeldKey {
  readonly key: string;
  readonly mode: BoardMode;
  /** What is left of the lease on the server, ms; null when the server keeps none (a session). */
  readonly leaseLeftMs: number | null;
  readonly holders: readonly BoardHolder[];
}

/** One waiter of a key's line, as the server tells it. */
export interface BoardLineWaiter {
  readonly owner: string | null;
  readonly token?: string;
  readonly mode: BoardMode;
  /** When it queued, epoch ms on the server's clock. */
  readonly since?: number;
  /** When it gives up, epoch ms on the server's clock. */
  readonly deadline?: number;
}

/** A key's waiting line on the server, in the order the key will be granted. */
export interface BoardKeyLine {
  readonly key: string;
  /** Waiters on the server (the list may stop before). */
  readonly length: number;
  readonly waiters: readonly BoardLineWaiter[];
}

/** The held and waited keys a bounded scan found. */
export interface BoardScan {
  readonly held: readonly string[];
  readonly waited: readonly string[];
  /** false when the scan stopped at its bound: the lists are a part. */
  readonly complete: boolean;
}

/** A server of the group as the board checks it (beyond `LockBackend.health`). */
export interface BoardNodeState {
  readonly node: string;
  readonly status: 'up' | 'down';
  readonly latencyMs?: number;
  readonly role?: string;
  /** A setting that puts locks at risk (Redis `maxmemory-policy`). */
  readonly warning?: string;
  readonly error?: string;
}

/**
 * Where the instances of a group publish their views (JSON the board writes and reads; opaque
 * here) and, where the server can keep them, their recent events.
 */
export interface BoardViewStore {
  /**
   * Publishes an instance's view (living `expiry` ms) and its new events; answers whether a
   * page of the board is open (then the instances publish more often).
   */
  publish(
    id: string,
    view: string,
    events: readonly BoardPublishedEvent[],
    expiry: number,
    eventsKept: number,
  ): Promise<boolean>;
  /** Tells the instances a page is open for the next `ms`. */
  watch(ms: number): Promise<void>;
  /** Drops an instance's view at once (a clean shutdown). */
  withdraw(id: string): Promise<void>;
  /** Every live instance's view. */
  views(): Promise<string[]>;
  /**
   * The last `count` events of each stream asked for, newest first; absent where the server
   * keeps no events (the page then lists this instance's own).
   */
  events?(count: number, streams: ReadonlyArray<'events' | 'busy'>): Promise<string[]>;
}

/** An event as published: its stream and its JSON. */
export interface BoardPublishedEvent {
  readonly stream: 'events' | 'busy';
  readonly json: string;
}

/** The board's reads (and force release) on one group's lock server. */
export interface BoardSource {
  /** What names this process on the server right now (see `BoardHolder.owner`). */
  owner(): string | undefined;
  /**
   * Whether the server's lines hold every waiting caller of every process, in grant order
   * (etcd, ZooKeeper, PostgreSQL); false where a process queues one caller per key and keeps
   * the others in its process (Redis on one node), whose views add them.
   */
  readonly everyCaller: boolean;
  /**
   * Whether the server keeps lines at all; false for a quorum that races (the instances'
   * views are its lines).
   */
  readonly queued: boolean;
  /** Where views are published; absent when the server has no place for them. */
  readonly views?: BoardViewStore;
  /** What the page's legend says of the columns this server cannot tell (and why). */
  readonly legend?: string;
  /** The server's clock, epoch ms (the times of rows are on it). */
  serverTime(): Promise<number>;
  /**
   * The held and waited keys that contain `search`, examining at most `maxScan` entries.
   * `named`: keys the instances published, for a server that keeps only a key's digest.
   */
  scan(search: string, maxScan: number, named: readonly string[]): Promise<BoardScan>;
  /** The holders of each key (keys held by nobody are left out). */
  held(keys: readonly string[]): Promise<BoardHeldKey[]>;
  /** The line of each key, its first `limit` waiters in order (keys without one left out). */
  lines(keys: readonly string[], limit: number): Promise<BoardKeyLine[]>;
  /**
   * Frees `key` if `holder` (read just before) still holds it, as its own release would (the
   * next waiter gets the key). true when freed, false when that holder holds it no more, or a
   * sentence saying why it is refused.
   */
  forceRelease?(key: string, holder: BoardHolder): Promise<boolean | string>;
  /** Checks of the servers beyond `LockBackend.health` (role, settings at risk). */
  nodes?(timeout: number): Promise<BoardNodeState[]>;
  /** Closes what the source opened. */
  close?(): Promise<void>;
}
