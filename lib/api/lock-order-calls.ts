import { hostname } from 'node:os';
import type { Logger } from '@nestjs/common';
import type { LockBackend } from '../core/lock-backend';
import type { OrderEdgeStore } from '../core/order-edge-store';
import type { LockedOptions } from '../interfaces';
import { callClassSet } from '../lock-order/call-classes';
import { EdgeSharing } from '../lock-order/edge-sharing';
import type { CallKind, HeldChain } from '../lock-order/held-chain';
import { type FoundCycle, LockOrderChecker } from '../lock-order/lock-order-checker';
import { type LocalHolder, LongWaits } from '../lock-order/long-waits';
import { type LockOrderGraphView, orderGraphView } from '../lock-order/order-graph-view';
import { publicEdges } from '../lock-order/order-report';
import type { ResolvedRedlockOptions } from '../options/redlock-options';
import type { ActiveHolds } from './active-holds';
import type { Behaviour } from './call-behaviour';
import type { LockEvents } from './lock-events';
import type { LockScope } from './lock-context';

/** How often the lock-order edges other instances stored are read again, in ms. */
const ORDER_REFRESH_MS = 5_000;
/**
 * How long startup waits for the first read of the stored lock-order edges, and shutdown for
 * the last edges sent, in ms.
 */
const ORDER_FIRST_READ_MS = 2_000;

/** What the order check reads of a decorated method (`LockedMethod`). */
interface OrderedMethod {
  readonly where: string;
  readonly classes?: readonly string[];
}

/**
 * What `LockService` does for lock-order checking (`lockOrder`, see `lib/lock-order/`) and for
 * long waits (`holderReportAfter`): the checker, the edges shared through the groups' backends,
 * and the reports (the module's Logger, the `lockOrder` event).
 * @internal
 */
export class LockOrderCalls {
  /** Absent with `lockOrder: 'off'`: the lock path then asks nothing of this class. */
  readonly checker?: LockOrderChecker;
  private readonly sharing?: EdgeSharing;
  /** Absent with `holderReportAfter: 0`. */
  private readonly longWaits?: LongWaits;

  constructor(
    options: Pick<ResolvedRedlockOptions, 'lockOrder' | 'holderReportAfter'>,
    private readonly logger: Logger,
    private readonly events: LockEvents,
    private readonly holds: ActiveHolds,
  ) {
    const instance = `${hostname()}:${process.pid}`;
    if (options.holderReportAfter > 0) {
      this.longWaits = new LongWaits(
        options.holderReportAfter,
        instance,
        (backend, key) => this.holderOf(backend, key),
        (message) => this.logger.warn(message),
      );
    }
    if (options.lockOrder !== 'off') {
      const sharing = new EdgeSharing(
        (edges) => this.checker?.merge(edges),
        (message) => this.logger.warn(message),
        ORDER_REFRESH_MS,
      );
      this.sharing = sharing;
      this.checker = new LockOrderChecker(
        options.lockOrder,
        instance,
        (found) => this.cycleFound(found),
        (group, store, edge) => sharing.send(group, store, edge),
        (message) => this.logger.warn(message),
      );
    }
  }

  /**
   * Starts the long-wait reports and reads the edges other instances stored in the groups'
   * backends (bounded: a store that does not answer is read again in the background).
   */
  async start(groups: readonly LockBackend[]): Promise<void> {
    this.longWaits?.start(groups);
    if (!this.sharing) return;
    const stores: [string, OrderEdgeStore][] = [];
    for (const group of groups) {
      if (group.orderEdges) stores.push([group.name, group.orderEdges]);
    }
    await this.sharing.start(stores, ORDER_FIRST_READ_MS);
  }

  /** Stops both; resolves once the edges still being stored are (a moment at most). */
  stop(): Promise<void> | undefined {
    this.longWaits?.stop();
    return this.sharing?.stop(ORDER_FIRST_READ_MS);
  }

  /** The cycles found, oldest first. */
  get cycles(): readonly FoundCycle[] {
    return this.checker?.cycles ?? [];
  }

  /** The graph this instance knows, for the lock board; none when `'off'`. */
  graph(): LockOrderGraphView | undefined {
    return this.checker && orderGraphView(this.checker.graph, this.checker.cycles);
  }

  /**
   * The lock classes the call's context holds once it has taken `needed` (of `sorted`, rendered
   * as `keys`): looked up by identity once the pair was seen (the steady state), checked against
   * the order graph the first time. Only while `checker` is set.
   * @throws LockOrderError with `lockOrder: 'throw'`, for a call that would close a cycle
   */
  chain(
    scope: LockScope | undefined,
    b: Behaviour,
    options: LockedOptions,
    method: OrderedMethod | undefined,
    keys: readonly string[],
    sorted: readonly string[],
    needed: readonly string[],
  ): HeldChain {
    const order = this.checker as LockOrderChecker;
    let held = order.root;
    let holder: LockScope | undefined;
    for (let s = scope; s; s = s.parent) {
      // The innermost hold still in force: a context can outlive its holds (a timer set inside).
      if (s.record.active) {
        held = s.chain ?? held;
        holder = s;
        break;
      }
    }
    const templates = method?.classes;
    // A method's templates are one class set whatever its arguments: found once, kept.
    const set =
      needed.length === sorted.length && templates
        ? (b.orderSet ??= callClassSet(
            order.classes,
            b.clientName,
            options,
            keys,
            templates,
            sorted,
          ))
        : callClassSet(order.classes, b.clientName, options, keys, templates, needed);
    if (!set) {
      order.rawClassesFull();
      return held;
    }
    const kind: CallKind =
      b.waitTimeout === 0 && b.segments === undefined
        ? 'tries'
        : options.nestedInOrder
          ? 'declared'
          : 'waits';
    return (
      held.next(set, kind) ??
      order.enter({
        held,
        set,
        kind,
        site: method?.where,
        heldAt: holder?.record.site,
        keys: needed,
        group: b.clientName,
        store: b.client.orderEdges,
      })
    );
  }

  /** The hold of this process on `key` of `backend`, if any (for a long wait's report). */
  private holderOf(backend: LockBackend, key: string): LocalHolder | undefined {
    for (const hold of this.holds) {
      if (hold.client === backend && hold.active && hold.lease.keys.includes(key)) {
        return {
          site: hold.site ?? 'LockService.using/acquire',
          acquiredAt: hold.lease.acquiredAt,
        };
      }
    }
    return undefined;
  }

  /** A lock-order cycle, once: logged, told to `lockOrder` listeners. */
  private cycleFound(found: FoundCycle): void {
    this.logger.warn(found.report);
    if (this.events.lockOrder && this.events.wants('lockOrder')) {
      this.events.emit('lockOrder', {
        keys: found.keys,
        client: found.group,
        cycle: publicEdges(found.cycle),
        report: found.report,
      });
    }
  }
}
