import { LockBackendError } from '../../errors';

/** Where a vote's conclusion goes: `error` undefined when it concluded `result`. */
export type VoteDone<R> = (error: unknown, result?: R) => void;

/**
 * Redlock's vote counting over N independent nodes, and the one way a round runs over them
 * (`collect`): a majority decides, and an outcome is known as soon as enough votes are in either
 * way. A single node is a vote of one: its answer decides.
 * @internal
 */
export class Quorum {
  /** Votes needed: a majority of the nodes. */
  readonly size: number;

  constructor(readonly nodes: number) {
    this.size = Math.floor(nodes / 2) + 1;
  }

  /** Whether `votesFor` nodes agreeing is a majority. */
  reached(votesFor: number): boolean {
    return votesFor >= this.size;
  }

  /** Whether `votesAgainst` nodes (refused or failed) leave no majority possible. */
  impossible(votesAgainst: number): boolean {
    return votesAgainst > this.nodes - this.size;
  }

  /**
   * Asks every node at once and concludes once `yes` holds for a majority (or `need` nodes), or
   * can no longer hold for one, or every node answered (`yes` undefined: the node abstains, it
   * counts neither way, so the others are heard): `done` then gets what `conclude` makes
   * of the answers (or what it threw, or what its promise rejected with), once. Answers still
   * out are `undefined` then; they arrive later and are dropped (their effect in Redis is the
   * caller's to undo if needed). `ask` also gets `over`, which tells whether the vote is over by
   * now. Answered by callback, not a promise: the uncontended cycle's rounds go through here.
   */
  collect<N, T, R>(
    nodes: readonly N[],
    ask: (node: N, answer: (v: T) => void, over: () => boolean) => void,
    yes: (v: T) => boolean | undefined,
    conclude: (answers: (T | undefined)[]) => R | Promise<R>,
    done: VoteDone<R>,
    need = this.size,
  ): void {
    const n = nodes.length;
    const answers = new Array<T | undefined>(n).fill(undefined);
    let ayes = 0;
    let noes = 0;
    let answered = 0;
    let over = false;
    const isOver = () => over;
    for (let i = 0; i < n; i++) {
      ask(
        nodes[i],
        (v) => {
          if (over) return;
          answers[i] = v;
          answered++;
          const vote = yes(v);
          if (vote === true) ayes++;
          else if (vote === false) noes++;
          if (ayes >= need || noes > n - need || answered === n) {
            over = true;
            concludeTo(conclude, answers, done);
          }
        },
        isOver,
      );
    }
  }

  /**
   * @throws LockBackendError when the nodes that failed (their answer an Error) leave no
   *   majority possible
   */
  failIfNoMajority(keys: readonly string[], answers: unknown[], operation: string): void {
    const errors = answers.filter((a): a is Error => a instanceof Error);
    if (this.impossible(errors.length)) throw new LockBackendError(keys, errors, operation);
  }
}

/** `conclude(answers)` to `done`; `done` is called outside the `try`, so it runs only once. */
function concludeTo<T, R>(
  conclude: (answers: (T | undefined)[]) => R | Promise<R>,
  answers: (T | undefined)[],
  done: VoteDone<R>,
): void {
  let result: R | Promise<R>;
  try {
    result = conclude(answers);
  } catch (err) {
    return done(err);
  }
  if (result instanceof Promise) {
    result.then(
      (r) => done(undefined, r),
      (err: unknown) => done(err),
    );
  } else done(undefined, result);
}
