import type { ClassSet, LockClass } from './lock-class';

/**
 * How a call takes its classes, which decides its edges: it may wait (`waits`), may wait but
 * declared the order it nests its own class in (`declared`: no self edge), or cannot wait
 * (`tries`, `waitTimeout: 0`: no edge at all).
 * @internal
 */
export type CallKind = 'waits' | 'declared' | 'tries';

/**
 * The classes an async context holds, in the order it took them (lockdep's "chain"), and the
 * chains it leads to. A call that takes `set` inside this chain looks its next chain up by the
 * set's identity: found, the pair was checked before and the call goes on (one map read, no
 * allocation: the steady state); not found, the checker sees it for the first time.
 * @internal
 */
export class HeldChain {
  /** Next chains, per kind of call, reached by the class sets checked (made on first use). */
  private waits?: Map<ClassSet, HeldChain>;
  private declared?: Map<ClassSet, HeldChain>;
  private tries?: Map<ClassSet, HeldChain>;

  constructor(readonly classes: readonly LockClass[]) {}

  /** The chain a call taking `set` leads to, if it was checked before. */
  next(set: ClassSet, kind: CallKind): HeldChain | undefined {
    return this[kind]?.get(set);
  }

  /** Remembers that `set` was checked in this chain (a refused call is not remembered). */
  remember(set: ClassSet, kind: CallKind): HeldChain {
    const added = set.classes.filter((c) => !this.classes.includes(c));
    const chain = added.length === 0 ? this : new HeldChain([...this.classes, ...added]);
    (this[kind] ??= new Map()).set(set, chain);
    return chain;
  }
}
