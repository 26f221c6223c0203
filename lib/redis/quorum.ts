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
   * dropped (their effect in Redis is the caller's to undo if needed).
   */
  collect<N, T, R = (T | undefined)[]>(
    nodes: readonly N[],
    ask: (node: N, answer: (v: T) => void) => void,
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
      for (let i = 0; i < n; i++) {
        ask(nodes[i], (v) => {
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
        });
      }
    });
  }
}
