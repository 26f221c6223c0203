/**
 * How a lock is held, as the order check sees it: two holds of one key template in different
 * modes are different classes (a read inside a read cannot deadlock as a write inside a write).
 */
export type LockClassMode = 'exclusive' | 'read' | 'permits';

/** A lock class as another process names it: its group, template (class form) and mode. */
export interface StoredLockClass {
  readonly group: string;
  readonly template: string;
  readonly mode: LockClassMode;
}

/** A lock-order edge as the group's backend stores it, for every instance to read. */
export interface StoredOrderEdge {
  readonly from: StoredLockClass;
  readonly to: StoredLockClass;
  /** Where it was first seen: `Class.method`, or the caller of `LockService.using`. */
  readonly site: string;
  /** The instance that first saw it (`<hostname>:<pid>`). */
  readonly instance: string;
}

/**
 * Where a backend keeps the lock-order edges its group's instances saw, so an inversion between
 * two instances (an API and a worker) is seen even though each took one order only. Optional on
 * `LockBackend`: without it, each instance checks its own edges. Neither call is on a lock's
 * path: an edge is added once per process, after the check, without waiting for the answer; the
 * list is read at startup and then in the background.
 * @internal
 */
export interface OrderEdgeStore {
  /** Stores `edge` unless its pair is stored already (the first site stays). */
  add(edge: StoredOrderEdge): Promise<void>;
  /** Every stored edge. */
  list(): Promise<StoredOrderEdge[]>;
}

/** The field an edge is stored under: one per class pair. @internal */
export const storedEdgeField = (edge: StoredOrderEdge): string =>
  JSON.stringify([
    edge.from.group,
    edge.from.template,
    edge.from.mode,
    edge.to.group,
    edge.to.template,
    edge.to.mode,
  ]);

/** An edge read back from a store, or undefined when it is not one (written by another version). */
export function parseStoredEdge(text: string): StoredOrderEdge | undefined {
  try {
    const e = JSON.parse(text) as Partial<StoredOrderEdge> | null;
    const isClass = (c: unknown): c is StoredLockClass => {
      const o = c as Partial<StoredLockClass> | null;
      return (
        typeof o?.group === 'string' &&
        typeof o.template === 'string' &&
        (o.mode === 'exclusive' || o.mode === 'read' || o.mode === 'permits')
      );
    };
    if (!e || !isClass(e.from) || !isClass(e.to)) return undefined;
    if (typeof e.site !== 'string' || typeof e.instance !== 'string') return undefined;
    return e as StoredOrderEdge;
  } catch {
    return undefined;
  }
}
