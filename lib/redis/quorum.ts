/**
 * Redlock's vote counting over N independent nodes, as a value: a majority decides, and an
 * outcome is known as soon as enough votes are in either way.
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
   * Asks every node at once and settles, in one promise, once `yes` holds for a majority (or
   * `need` nodes), or can no longer hold for one, or every node answered, with what `conclude`
   * makes of the answers. Answers still out are `undefined` then; they arrive later and are
   * dropped (their effect in Redis is the caller's to undo if needed). `ask` also gets `over`,
   * which tells whether the vote is over by now.
   */
  collect<N, T, R = (T | undefined)[]>(
    nodes: readonly N[],
    ask: (node: N, answer: (v: T) => void, over: () => boolean) => void,
    yes: (v: T) => boolean,
    conclude: (answers: (T | undefined)[]) => R | Promise<R> = (a) => a as R,
    need = this.size,
  ): Promise<R> {
    const n = nodes.length;
    const answers = new Array<T | undefined>(n).fill(undefined);
    return new Promise((resolve, reject) => {
      let ayes = 0;
      let noes = 0;
      let done = false;
      const over = () => done;
      for (let i = 0; i < n; i++) {
        ask(
          nodes[i],
          (v) => {
            if (done) return;
            answers[i] = v;
            if (yes(v)) ayes++;
            else noes++;
            if (ayes >= need || noes > n - need || ayes + noes === n) {
              done = true;
              try {
                resolve(conclude(answers));
              } catch (err) {
                reject(err);
              }
            }
          },
          over,
        );
      }
    });
  }
}

/**
 * One vote over the nodes as an object (`Quorum.collect` with no closure per node): the
 * answers come in by `vote(i, answer)`, and `promise` settles once `yes` holds for `need`
 * nodes, or can no longer hold for them, or every node answered, with what `conclude` makes of
 * the answers (those still out are `undefined`; later ones are dropped).
 * @internal
 */
export abstract class Ballot<T, R> {
  readonly promise: Promise<R>;
  /** Each node's answer, by index; `undefined` while out. */
  protected readonly answers: (T | undefined)[];
  private ayes = 0;
  private noes = 0;
  private resolve!: (result: R | PromiseLike<R>) => void;
  private reject!: (error: unknown) => void;

  constructor(
    private readonly n: number,
    private readonly need: number,
  ) {
    this.answers = new Array<T | undefined>(n).fill(undefined);
    this.promise = new Promise<R>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
  }

  /** Whether the vote is over (later answers are dropped). */
  get over(): boolean {
    return (
      this.ayes >= this.need || this.noes > this.n - this.need || this.ayes + this.noes === this.n
    );
  }

  /** Node `i` answered. */
  protected vote(i: number, answer: T): void {
    if (this.over) return;
    this.answers[i] = answer;
    if (this.yes(answer)) this.ayes++;
    else this.noes++;
    if (!this.over) return;
    try {
      this.resolve(this.conclude(this.answers));
    } catch (err) {
      this.reject(err);
    }
  }

  protected abstract yes(answer: T): boolean;

  protected abstract conclude(answers: (T | undefined)[]): R | Promise<R>;
}
