import { performance } from 'node:perf_hooks';
import { type DeadlineListener, DeadlineTimer } from './deadline-timer';

/**
 * What a parked reader is told when its turn comes: `lead` asks Redis first, and calls `done`
 * once its acquire settled, with the share it took if any, which lets the others go with that
 * share (`shared`): they join it if they may, else ask themselves. The others' `done` does
 * nothing.
 */
export interface ParkedTurn<S> {
  readonly lead: boolean;
  readonly shared?: S;
  done(shared?: S): void;
}

/**
 * Readers of this process that wait in the process, not in Redis, behind a writer of this
 * process (one holding or waiting for the key in its key line), per key, oldest first. Rules it
 * enforces:
 * - a reader parks at most once per acquire (the engine asks only before its first try), and
 *   ends at its deadline (`expired`) or on its signal, whichever comes first, leaving the others;
 * - a reader whose writers hold the key here until a known time (a lease that may run out with
 *   no release: a forgotten handle) gets its turn alone then (`soloAt`), not at its deadline;
 * - all of a key's readers get their turn together (`wake`): the oldest asks Redis first, the
 *   others only once it has settled, with the share it took, so they can join it instead of each
 *   asking;
 * - `oldest` tells a holder passing the key on when the oldest of them arrived: a writer that
 *   came later does not get the key in the process before them.
 * @internal
 */
export class ParkedReaders<S> {
  private readonly byKey = new Map<string, ParkedReader<S>[]>();

  /** How many keys have parked readers (for tests: none once every wait is over). */
  get size(): number {
    return this.byKey.size;
  }

  /**
   * Parks a reader of `key` that arrived at `arrivedAt` until its turn (resolves; alone at
   * `soloAt` if that comes first), its `deadline` (rejects with `expired()`), or `signal`
   * (rejects with its reason).
   */
  park(
    key: string,
    arrivedAt: number,
    deadline: number,
    soloAt: number,
    signal: AbortSignal | undefined,
    expired: () => unknown,
  ): Promise<ParkedTurn<S>> {
    return new Promise<ParkedTurn<S>>((resolve, reject) => {
      let list = this.byKey.get(key);
      if (!list) this.byKey.set(key, (list = []));
      const reader = new ParkedReader<S>(key, arrivedAt, this, resolve, reject, expired, signal);
      list.push(reader);
      reader.arm(deadline, soloAt);
    });
  }

  /** When the oldest reader parked on `key` arrived (performance.now() clock), if any. */
  oldest(key: string): number | undefined {
    return this.byKey.get(key)?.[0]?.arrivedAt;
  }

  /**
   * The turn of the readers parked on `key` that arrived before `before` (all by default): the
   * oldest first, the others once it settled; `then` (the writer of this process that arrived at
   * `before`) once it settled too. Later readers stay parked, behind that writer. False when none
   * had its turn (`then` is not called).
   */
  wake(key: string, then?: () => void, before = Number.POSITIVE_INFINITY): boolean {
    const list = this.byKey.get(key);
    if (!list || !(list[0].arrivedAt < before)) return false;
    let n = 1;
    while (n < list.length && list[n].arrivedAt < before) n++;
    const [lead, ...others] = list.splice(0, n);
    if (list.length === 0) this.byKey.delete(key);
    let released = false;
    lead.turn(true, undefined, (shared?: S) => {
      if (released) return;
      released = true;
      for (const r of others) r.turn(false, shared, NOTHING);
      then?.();
    });
    return true;
  }

  /** Every parked reader ends with `reason(key)` (the client closes). */
  endAll(reason: (key: string) => unknown): void {
    const lists = [...this.byKey.values()];
    this.byKey.clear();
    for (const list of lists) for (const r of list) r.fail(reason(r.key));
  }

  /** @internal A reader left before its turn (deadline, signal). */
  left(reader: ParkedReader<S>): void {
    const list = this.byKey.get(reader.key);
    if (!list) return;
    const i = list.indexOf(reader);
    if (i >= 0) list.splice(i, 1);
    if (list.length === 0) this.byKey.delete(reader.key);
  }
}

const NOTHING = (): void => undefined;

/** One parked reader: its own deadline timer and signal listener, no closure per timer. */
class ParkedReader<S> implements DeadlineListener {
  private timer?: DeadlineTimer;
  private settled = false;
  private deadline = 0;
  private readonly onAbort?: () => void;

  constructor(
    readonly key: string,
    readonly arrivedAt: number,
    private readonly owner: ParkedReaders<S>,
    private readonly resolve: (turn: ParkedTurn<S>) => void,
    private readonly reject: (error: unknown) => void,
    private readonly expired: () => unknown,
    private readonly signal: AbortSignal | undefined,
  ) {
    if (signal) {
      this.onAbort = () => this.leave(signal.reason);
      signal.addEventListener('abort', this.onAbort, { once: true });
    }
  }

  arm(deadline: number, soloAt: number): void {
    this.deadline = deadline;
    if (this.settled) return;
    if (this.signal?.aborted) return this.leave(this.signal.reason);
    const at = Math.min(deadline, soloAt);
    if (at <= performance.now()) return this.onDeadline();
    this.timer = new DeadlineTimer(at, this);
  }

  onDeadline(): void {
    if (performance.now() >= this.deadline) return this.leave(this.expired());
    // The holds ahead of it ran out: its turn, alone.
    if (!this.end()) return;
    this.owner.left(this);
    this.resolve({ lead: true, done: NOTHING });
  }

  turn(lead: boolean, shared: S | undefined, done: (shared?: S) => void): void {
    if (!this.end()) return done(shared);
    this.resolve({ lead, shared, done });
  }

  fail(error: unknown): void {
    if (this.end()) this.reject(error);
  }

  private leave(error: unknown): void {
    if (!this.end()) return;
    this.owner.left(this);
    this.reject(error);
  }

  /** Ends the wait once: false if it had ended already. */
  private end(): boolean {
    if (this.settled) return false;
    this.settled = true;
    this.timer?.cancel();
    if (this.onAbort) this.signal!.removeEventListener('abort', this.onAbort);
    return true;
  }
}
