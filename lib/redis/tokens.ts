import { randomBytes } from 'node:crypto';
import { TOKEN_SEPARATOR } from './protocol/key-space';

/**
 * Owner tokens of one client group: unique per acquisition, a random prefix per group (so two
 * groups or two apps in one process never mistake each other's grants) plus a counter (cheap,
 * never reused). Remembers which tokens hold a lock that a grant could also reach, so a late
 * grant for one of them is ignored.
 * @internal
 */
export class Tokens {
  /** Every token of this group starts with it (and the separator): its grant channel's name. */
  readonly prefix = randomBytes(9).toString('base64url');
  private seq = 0;
  private readonly holding = new Set<string>();

  next(): string {
    return this.prefix + TOKEN_SEPARATOR + (this.seq++).toString(36);
  }

  /** The token holds a lock now. */
  hold(token: string): void {
    this.holding.add(token);
  }

  /** The token holds nothing any more. */
  drop(token: string): void {
    // Most releases are of first tries, whose tokens were never held here: no hashing then.
    if (this.holding.size > 0) this.holding.delete(token);
  }

  holds(token: string): boolean {
    return this.holding.has(token);
  }
}
