/** One caller's entry in a turn: its own transaction's answer, then the place it is given. */
interface Member<T> {
  answer?: T;
  error?: unknown;
  answered: boolean;
  settle(place: T | undefined, error?: unknown): void;
}

/** Entries of this process sent together into the same lines (see `EntryOrder`). */
interface Turn<T> {
  /** Entries alike (same keys, same kind) may join while it is open; undefined: none. */
  readonly alike?: string;
  /** Open until the first answer of a member comes. */
  open: boolean;
  /** Resolves when its members may be sent (every earlier turn on its keys is over). */
  readonly started: Promise<void>;
  readonly members: Member<T>[];
  /** Resolves once every member is answered and given its place. */
  readonly over: Promise<void>;
  end(): void;
}

/**
 * Keeps the entries of this process into a line in the order they were asked.
 *
 * etcd serves concurrent requests in any order (even those of one connection), so two callers
 * of one process that ask a moment apart could swap places in a line if both were sent at
 * once; and sending one entry per round trip would cap a hot key's first round (50 callers
 * that arrive together enter one by one). So entries go in turns: a turn's first entry goes
 * once the entries before it are answered, and entries alike (an exclusive hold of the same
 * keys) asked while its first answer is not in yet join it and go at once. Once every entry of
 * the turn is answered, its places in the lines (the keys it wrote, by create revision) are
 * given out in the order the entries were asked: they are all keys of this process, of one
 * kind, so which caller holds which one is this process's choice. Between processes, the order
 * is the order etcd received them.
 * @internal
 */
export class EntryOrder<T> {
  /** Per lock key, the last turn of this process into its line, until it is over. */
  private readonly last = new Map<string, Turn<T>>();

  /** `revision`: the create revision of an entry's keys (its place in the lines). */
  constructor(private readonly revision: (entry: T) => bigint) {}

  /**
   * Runs `enter` in turn and answers the place given to this caller: its own entry's answer,
   * or that of an entry alike of the same turn that etcd placed earlier.
   *
   * @param alike what makes entries alike (keys and kind); undefined: this entry goes alone
   */
  async inTurn(
    keys: readonly string[],
    alike: string | undefined,
    enter: () => Promise<T>,
  ): Promise<T> {
    const before = new Set<Turn<T>>();
    for (const key of keys) {
      const turn = this.last.get(key);
      if (turn) before.add(turn);
    }
    const [previous] = before;
    let turn: Turn<T>;
    if (alike !== undefined && before.size === 1 && previous.open && previous.alike === alike) {
      turn = previous;
    } else {
      turn = this.turn(alike, [...before]);
      for (const key of keys) this.last.set(key, turn);
      void turn.over.then(() => {
        for (const key of keys) if (this.last.get(key) === turn) this.last.delete(key);
      });
    }
    const placed = new Promise<T>((resolve, reject) => {
      const member: Member<T> = {
        answered: false,
        settle: (place, error) => (place === undefined ? reject(error) : resolve(place)),
      };
      turn.members.push(member);
      void turn.started.then(() =>
        enter().then(
          (answer) => this.answered(turn, member, answer),
          (error: unknown) => this.answered(turn, member, undefined, error),
        ),
      );
    });
    return placed;
  }

  private turn(alike: string | undefined, before: readonly Turn<T>[]): Turn<T> {
    let end!: () => void;
    const over = new Promise<void>((resolve) => (end = resolve));
    return {
      alike,
      open: true,
      started: Promise.all(before.map((turn) => turn.over)).then(() => undefined),
      members: [],
      over,
      end,
    };
  }

  private answered(turn: Turn<T>, member: Member<T>, answer: T | undefined, error?: unknown) {
    turn.open = false;
    member.answer = answer;
    member.error = error;
    member.answered = true;
    if (!turn.members.every((m) => m.answered)) return;
    // Places by create revision, to the members that got one, in the order they asked.
    const places = turn.members
      .filter((m) => m.answer !== undefined)
      .map((m) => m.answer!)
      .sort((a, b) => {
        const d = this.revision(a) - this.revision(b);
        return d < 0n ? -1 : d > 0n ? 1 : 0;
      });
    let next = 0;
    for (const m of turn.members) {
      if (m.answer === undefined) m.settle(undefined, m.error);
      else m.settle(places[next++]);
    }
    turn.end();
  }
}
