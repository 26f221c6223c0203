import type { Etcd3, IKeyValue, IRequestOp } from 'etcd3';
import type { LockConfigError } from '../errors';
import type { Share } from '../core/lock-backend';
import { shareMismatch } from '../core/share-mismatch';
import { ETCD_ACQUIRE_ABANDONED } from './etcd.messages';
import { kindValue, OTHER_PART, shareOf } from './etcd-names';
import { lineRange, notCancelled, permitted, put } from './etcd-requests';

/** What the transaction that puts a caller's keys in their lines found. @internal */
export interface Entry {
  /** The keys it wrote (one per lock key). */
  readonly names: readonly string[];
  /** The revision of that transaction: the create revision of every key it wrote. */
  readonly revision: string;
  /** Per key: whether it is the caller's already. */
  readonly granted: readonly boolean[];
  /** Per key: the key it waits for first, when the transaction told it. */
  readonly before: readonly (IKeyValue | undefined)[];
  /** The revision the transaction saw: a watch of `before` starts after it. */
  readonly seen: string;
  /** A hold of another kind holds one of the keys (LockConfigError). */
  readonly mismatch?: LockConfigError;
}

/**
 * The entry of a caller into the lines of its keys, in one transaction: puts the caller's key in the line of each lock key and reads, per line,
 * whether the caller is in already, the kind of the first holder (for a shared hold), and the
 * key a writer or a reader would wait for (the last one before it: Go asks for it in a second
 * round trip; here every other key of the line is older than the caller's, so it comes in
 * the same transaction).
 * @internal
 */
export async function enterLines(
  client: Etcd3,
  keyPrefix: string,
  keys: readonly string[],
  lines: readonly string[],
  names: readonly string[],
  sessionId: string,
  share: Share | undefined,
): Promise<Entry> {
  const value = kindValue(share);
  const ops: IRequestOp[] = [];
  for (let i = 0; i < lines.length; i++) {
    ops.push(put(names[i], value, sessionId, true));
    if (share === undefined) {
      // The caller's key and the one before it.
      ops.push(lineRange(lines[i], 'Descend', 2));
    } else if (share === 'read') {
      ops.push(lineRange(lines[i], 'Ascend', 1));
      // The last writer (or permit) before it.
      ops.push(lineRange(lines[i] + OTHER_PART, 'Descend', 1));
    } else {
      ops.push(lineRange(lines[i], 'Ascend', share));
    }
  }
  const res = await client.kv.txn({
    compare: [notCancelled(keyPrefix, names)],
    success: ops,
  });
  // Cancelled (see `OwnKeys.abandon`) before etcd applied it: as if it had failed.
  if (!res.succeeded) throw new Error(ETCD_ACQUIRE_ABANDONED);
  // A retry of a transaction whose answer was lost: the keys were written by the first try,
  // and newer keys may be in the line now; the waits then ask who is before the caller.
  const prev = res.responses[0].response_put.prev_kv;
  const revision = prev ? prev.create_revision : res.header.revision;
  const step = share === 'read' ? 3 : 2;
  const granted: boolean[] = [];
  const before: (IKeyValue | undefined)[] = [];
  let mismatch: LockConfigError | undefined;
  for (let i = 0; i < lines.length; i++) {
    const kvs = res.responses[i * step + 1].response_range.kvs;
    // A shared hold's first range starts with the line's first holder.
    if (share !== undefined && kvs[0]) {
      mismatch ??= shareMismatch(keys[i], share, shareOf(kvs[0].value.toString()));
    }
    if (share === undefined) {
      granted.push(!prev && kvs.length === 1);
      before.push(prev ? undefined : kvs[1]);
    } else if (share === 'read') {
      const last = res.responses[i * step + 2].response_range.kvs[0];
      granted.push(!prev && !last);
      before.push(prev ? undefined : last);
    } else {
      granted.push(permitted(kvs, names[i], value));
      before.push(undefined);
    }
  }
  return { names, revision, granted, before, seen: res.header.revision, mismatch };
}
