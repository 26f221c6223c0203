import type { EventEmitter } from 'node:events';
import type { SqlSession } from './sql-dialect';

const ENDED = new Error('the connection ended');

/**
 * The listeners of one driver connection, attached once for its life (not at every checkout, on
 * the lock's hot path): they tell the session that has it checked out, if any.
 */
class ConnectionRelay {
  current?: ListeningSession;

  constructor(events: EventEmitter) {
    // A checked-out driver connection without an `error` listener would end the process when
    // it fails; an idle one's errors are the pool's to handle.
    events.on('error', (error: Error) => this.current?.lost(error));
    events.on('end', () => this.current?.lost(ENDED));
  }
}

const relays = new WeakMap<EventEmitter, ConnectionRelay>();

/**
 * A pooled connection held for one hold, listening to its connection from checkout to release:
 * an error or end while it is out is the session lost.
 * @internal
 */
export abstract class ListeningSession implements SqlSession {
  abstract readonly id: number;
  private listener?: (cause: Error) => void;
  private released = false;
  private readonly relay: ConnectionRelay;

  constructor(events: EventEmitter) {
    let relay = relays.get(events);
    if (!relay) relays.set(events, (relay = new ConnectionRelay(events)));
    relay.current = this;
    this.relay = relay;
  }

  watch(listener: (cause: Error) => void): void {
    this.listener = listener;
  }

  release(destroy: boolean): void {
    if (this.released) return;
    this.released = true;
    this.listener = undefined;
    if (this.relay.current === this) this.relay.current = undefined;
    this.giveBack(destroy);
  }

  /** The connection failed or ended while this session had it. */
  lost(cause: Error): void {
    this.listener?.(cause);
  }

  /** Back to the pool, or closed (`destroy`: its session locks go with it on the server). */
  protected abstract giveBack(destroy: boolean): void;
}
