import type { IKeyValue, IRequestOp } from 'etcd3';
import { prefixEnd } from './etcd-names';

// The operations of the lock recipe's transactions, built in one place.

/**
 * The cancel mark of the acquire that writes `names` (see `OwnKeys.abandon`): `<keyPrefix>\0cancelled/`
 * and the first name, outside every line (a line's prefix goes on with a digit, its length).
 */
export function cancelMark(keyPrefix: string, names: readonly string[]): string {
  return `${keyPrefix}\0cancelled/${names[0]}`;
}

/** Compare: the acquire that writes `names` was not abandoned. */
export function notCancelled(keyPrefix: string, names: readonly string[]) {
  return {
    key: Buffer.from(cancelMark(keyPrefix, names)),
    target: 'Version' as const,
    result: 'Equal' as const,
    version: 0,
  };
}

/** A put of `name` bound to `lease`. */
export function put(name: string, value: string, lease: string, prevKv = false): IRequestOp {
  return {
    request_put: { key: Buffer.from(name), value: Buffer.from(value), lease, prev_kv: prevKv },
  };
}

/** The keys of `prefix` by create revision (`limit` of them), without values. */
export function lineRange(prefix: string, order: 'Ascend' | 'Descend', limit: number): IRequestOp {
  const key = Buffer.from(prefix);
  return {
    request_range: {
      key,
      range_end: prefixEnd(key),
      sort_order: order,
      sort_target: 'Create',
      limit,
      keys_only: order === 'Descend',
    },
  };
}

/**
 * Compares: no key named `names` is newer than `revision` (it is that one, or gone). A delete
 * under this compare cannot reach a later key that took one of the names again (see
 * `EtcdSession.reuse`), however late etcd applies it.
 */
export function noNewerThan(names: readonly string[], revision: string) {
  const after = String(BigInt(revision) + 1n);
  return names.map((name) => ({
    key: Buffer.from(name),
    target: 'Create' as const,
    result: 'Less' as const,
    create_revision: after,
  }));
}

/** Compares: each key still exists with the hold's create revision. */
export function ownedBy(names: readonly string[], revision: string) {
  return names.map((name) => ({
    key: Buffer.from(name),
    target: 'Create' as const,
    result: 'Equal' as const,
    create_revision: revision,
  }));
}

/**
 * Permits of N: the caller's key is among the first N of the line, behind permits of N only
 * (an exclusive holder or a reader first keeps it waiting).
 */
export function permitted(first: readonly IKeyValue[], name: string, value: string): boolean {
  for (const kv of first) {
    if (kv.key.toString() === name) return true;
    if (kv.value.toString() !== value) return false;
  }
  return false;
}
