import { LockOrderError } from '../errors/lock-order.error';
import { callSite } from './call-site';
import { logCycle } from './cycle-log';
import { type CallKind, HeldChain } from './held-chain';
import { type ClassSet, type LockClass, LockClasses, RAW_CLASS_LIMIT } from './lock-class';
import { RAW_CLASSES_FULL } from './lock-order.messages';
import type { OrderEdgeStore, StoredLockClass, StoredOrderEdge } from '../core/order-edge-store';
import { type OrderEdge, OrderGraph } from './order-graph';
import { cycleKey, cycleReport, type FoundCycle, publicEdges } from './order-report';

export type { FoundCycle } from './order-report';

/** What one acquire asks of the checker. @internal */
export interface OrderedCall {
  /** What this context holds now (the root chain outside any locked call). */
  readonly held: HeldChain;
  /** The classes the call takes together. */
  readonly set: ClassSet;
  /** Whether it may wait, and whether it declared the order it nests its own class in. */
  readonly kind: CallKind;
  /** `Class.method`; absent for `LockService.using`/`acquire` (the caller's frame is read). */
  readonly site: string | undefined;
  /** Where the innermost hold of the context was taken, when known (`Class.method`). */
  readonly heldAt: string | undefined;
  readonly keys: readonly string[];
  readonly group: string;
  /** The group's edge store, when its backend has one. */
  readonly store: OrderEdgeStore | undefined;
}

/**
 * Lock-order checking (PRODUCT 2.11), after Linux's lockdep: while a context holds classes H, an
 * acquire of class C that may wait adds the edges H -> C; a new edge that closes a cycle is
 * reported once per cycle (`'warn'`) or refuses the acquire before it waits (`'throw'`). Each
 * chain of held classes is checked once per class set it leads to (see `HeldChain`), so the
 * steady state costs a map read.
 * @internal
 */
export class LockOrderChecker {
  readonly classes = new LockClasses();
  readonly graph = new OrderGraph();
  /** What a context outside any locked call holds: nothing. */
  readonly root = new HeldChain([]);
  /** The cycles reported, by key. */
  private readonly reported = new Map<string, FoundCycle>();
  private rawFullTold = false;

  constructor(
    private readonly mode: 'warn' | 'throw',
    readonly instance: string,
    /** Told each cycle once (the service logs it and emits `lockOrder`). */
    private readonly report: (found: FoundCycle) => void,
    /** Told each new edge of this instance, for the group's store. */
    private readonly share: (group: string, store: OrderEdgeStore, edge: StoredOrderEdge) => void,
    /** Logs what the checker has to say besides cycles. */
    private readonly warn: (message: string) => void,
  ) {}

  /** The cycles found so far, oldest first. */
  get cycles(): readonly FoundCycle[] {
    return [...this.reported.values()];
  }

  /**
   * The chain the call's context holds once it has taken its keys. The first time a chain meets
   * a class set, the new edges are checked against the graph.
   * @throws LockOrderError in `'throw'` mode, when the call would close a cycle (nothing added)
   */
  enter(call: OrderedCall): HeldChain {
    return call.held.next(call.set, call.kind) ?? this.firstTime(call);
  }

  /** A raw key found raw keys' classes full: its call is not checked (told once). */
  rawClassesFull(): void {
    if (this.rawFullTold) return;
    this.rawFullTold = true;
    this.warn(RAW_CLASSES_FULL(RAW_CLASS_LIMIT));
  }

  /** Merges edges other instances stored; a cycle they close is reported like a local one. */
  merge(edges: readonly StoredOrderEdge[]): void {
    for (const stored of edges) {
      const from = this.classOf(stored.from);
      const to = this.classOf(stored.to);
      if (this.graph.get(from, to)) continue;
      const edge: OrderEdge = { from, to, site: stored.site, instance: stored.instance };
      const rest = this.graph.cycleThrough(from, to);
      this.graph.add(edge);
      if (rest) this.found([edge, ...rest], [], to.group);
    }
  }

  private firstTime(call: OrderedCall): HeldChain {
    const { held, set, kind } = call;
    if (kind === 'tries' || held.classes.length === 0) return held.remember(set, kind);
    let site: string | undefined;
    const fresh: OrderEdge[] = [];
    const cycles: OrderEdge[][] = [];
    for (const from of held.classes) {
      for (const to of set.classes) {
        if ((from === to && kind === 'declared') || this.graph.get(from, to)) continue;
        site ??= siteOf(call);
        const edge: OrderEdge = { from, to, site, instance: this.instance };
        const rest = this.graph.cycleThrough(from, to);
        if (rest) cycles.push([edge, ...rest]);
        fresh.push(edge);
      }
    }
    if (cycles.length > 0 && this.mode === 'throw') {
      // Refused: nothing is added nor remembered, so the next such call is refused too.
      const found = cycles.map((cycle) => this.found(cycle, call.keys, call.group));
      throw new LockOrderError(call.keys, publicEdges(cycles[0]), found[0].report);
    }
    for (const edge of fresh) {
      this.graph.add(edge);
      if (call.store) this.share(call.group, call.store, stored(edge));
    }
    for (const cycle of cycles) this.found(cycle, call.keys, call.group);
    return held.remember(set, kind);
  }

  /** Reports `cycle` unless it was reported before; the report either way. */
  private found(cycle: OrderEdge[], keys: readonly string[], group: string): FoundCycle {
    const key = cycleKey(cycle);
    let found = this.reported.get(key);
    if (!found) {
      found = { cycle, report: cycleReport(cycle), keys, group };
      this.reported.set(key, found);
      logCycle(found);
      this.report(found);
    }
    return found;
  }

  private classOf(c: StoredLockClass): LockClass {
    return this.classes.get(c.group, c.mode, c.template);
  }
}

/** The call's site, with where the hold it nests in was taken when that is known. */
function siteOf(call: OrderedCall): string {
  const site = call.site ?? callSite();
  return call.heldAt ? `${site} inside ${call.heldAt}` : site;
}

const storedClass = (c: LockClass): StoredLockClass => ({
  group: c.group,
  template: c.template,
  mode: c.mode,
});

const stored = (e: OrderEdge): StoredOrderEdge => ({
  from: storedClass(e.from),
  to: storedClass(e.to),
  site: e.site,
  instance: e.instance,
});
