import type { Share } from '../core/lease';

/**
 * The znodes of one key: its parent (`<root>/<encoded key>`) holds one ephemeral sequential child
 * per holder or waiter, named `<kind>-<token>-<sequence>`, where kind is `write` (the exclusive
 * lock), `read`, or `permits<N>`. ZooKeeper appends the 10-digit sequence; the line is the
 * children in sequence order (Curator's LockInternals, and the read/write recipe of ZooKeeper's
 * documentation).
 * @internal
 */
export interface LockNode {
  /** The child's name. */
  readonly name: string;
  /** `write`, `read` or `permits<N>`. */
  readonly kind: string;
  readonly sequence: number;
}

/** The kind prefix of a hold: `write` for the exclusive lock. */
export function nodeKind(share: Share | undefined): string {
  if (share === undefined) return 'write';
  return share === 'read' ? 'read' : `permits${share}`;
}

/** The name a new node asks for (ZooKeeper appends the sequence). */
export function nodePrefix(share: Share | undefined, token: string): string {
  return `${nodeKind(share)}-${token}-`;
}

/**
 * A key as one znode name: percent-encoded (a name holds no `/`), and `.` encoded too (`.` and
 * `..` are not valid names). Injective, so two keys never share a parent.
 */
export function keyNodeName(key: string): string {
  return encodeURIComponent(key).replace(/\./g, '%2E');
}

/** The children that are lock nodes, in line order (foreign children are ignored). */
export function lockLine(children: readonly string[]): LockNode[] {
  const nodes: LockNode[] = [];
  for (const name of children) {
    const dash = name.indexOf('-');
    const sequence = Number(name.slice(-10));
    if (dash <= 0 || name.length < dash + 12 || !Number.isInteger(sequence)) continue;
    nodes.push({ name, kind: name.slice(0, dash), sequence });
  }
  return nodes.sort((a, b) => a.sequence - b.sequence);
}

/** What a node's place in its line means for it. */
export type Admission =
  | { readonly admitted: true }
  /** Not yet: it waits for one of these nodes (ahead of it) to go. */
  | { readonly admitted: false; readonly watch: readonly LockNode[] }
  /** A shared hold of another kind is ahead (read against permits, another N). */
  | { readonly admitted: false; readonly mismatch: LockNode };

const EXCLUSIVE = 'write';

/**
 * Whether the node `own` of kind `share` holds its key, given the line, and if not, which nodes
 * to watch, so a release wakes only the waiters it lets in (no herd):
 * - exclusive: first in line; else it watches the node just ahead;
 * - read: no exclusive node ahead; else it watches the last exclusive node ahead;
 * - permits of N: no exclusive node ahead and fewer than N ahead; else the last exclusive node
 *   ahead, or the N nodes just ahead (it goes in as soon as any of them leaves).
 * A node of the line that is gone from `line` (not listed) is treated as not there at all.
 */
export function admission(line: readonly LockNode[], own: string, share?: Share): Admission {
  const at = line.findIndex((n) => n.name === own);
  const ahead = at < 0 ? line : line.slice(0, at);
  if (share === undefined) {
    return ahead.length === 0 ? { admitted: true } : { admitted: false, watch: ahead.slice(-1) };
  }
  const kind = nodeKind(share);
  let lastExclusive: LockNode | undefined;
  for (const node of ahead) {
    if (node.kind === EXCLUSIVE) lastExclusive = node;
    else if (node.kind !== kind) return { admitted: false, mismatch: node };
  }
  if (lastExclusive) return { admitted: false, watch: [lastExclusive] };
  if (share === 'read' || ahead.length < share) return { admitted: true };
  return { admitted: false, watch: ahead.slice(-share) };
}

/** The share a node kind stands for (`undefined`: exclusive), for error messages. */
export function kindShare(kind: string): Share | undefined {
  if (kind === 'read') return 'read';
  if (kind.startsWith('permits')) return Number(kind.slice('permits'.length));
  return undefined;
}
