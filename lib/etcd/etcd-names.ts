import type { Share } from '../core/lease';

/**
 * Where the holds of one lock key live in etcd, and what each hold's key and value say.
 *
 * The line of a lock key is the prefix `<keyPrefix><length>:<key>/`. The length makes prefixes
 * free of each other: without it the line of `a` (`lock:a/`) would contain the line of `a/b`
 * (`lock:a/b/`), and a hold of one would block the other. Under the prefix each hold (held or
 * waiting) is one key bound to the process's session lease:
 * - `<line>r/<session>.<n>` for a reader, so a reader can ask for the writers before it alone;
 * - `<line>x/<session>.<n>` for everything else (an exclusive hold or a permit);
 * and its value tells the kind: `w` (exclusive), `r` (read) or N (a permit of N).
 * @internal
 */
export const READ_PART = 'r/';
/** @internal */
export const OTHER_PART = 'x/';

/** @internal */
export function linePrefix(keyPrefix: string, key: string): string {
  return `${keyPrefix}${key.length}:${key}/`;
}

/** The value of a hold's key: its kind. @internal */
export function kindValue(share: Share | undefined): string {
  if (share === undefined) return 'w';
  return share === 'read' ? 'r' : String(share);
}

/** The kind a hold's value tells, as a `Share` (undefined for the exclusive lock). @internal */
export function shareOf(value: string): Share | undefined {
  if (value === 'w') return undefined;
  return value === 'r' ? 'read' : Number(value);
}

/** The end of the range of every key that starts with `prefix` (its last byte + 1). @internal */
export function prefixEnd(prefix: Buffer): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i] < 0xff) {
      end[i]++;
      return end.subarray(0, i + 1);
    }
  }
  // Only 0xff bytes: every key from the prefix on.
  return Buffer.from([0]);
}

/**
 * The range of the first key of `line` by create revision (its holder, if it has any): one key,
 * with its lease. @internal
 */
export function firstOf(line: string) {
  const key = Buffer.from(line);
  return {
    key,
    range_end: prefixEnd(key),
    sort_order: 'Ascend' as const,
    sort_target: 'Create' as const,
    limit: 1,
  };
}
