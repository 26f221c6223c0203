import type * as Zk from 'node-zookeeper-client';
import type {
  BoardHeldKey,
  BoardHolder,
  BoardKeyLine,
  BoardMode,
  BoardPublishedEvent,
  BoardScan,
  BoardSource,
  BoardViewStore,
} from '../core/board-source';
import {
  heldAndWaited,
  liveView,
  type OrderedEntry,
  splitLine,
  viewRecord,
  waitingLines,
} from '../core/board-lines';
import { type LockNode, lockLine } from './lock-nodes';
import { ZK, type ZooKeeperDriver, type ZooKeeperSession, zkCode } from './zookeeper-session';

/**
 * The name of the board's node under the root: a key's node name never holds a `:` (it is
 * percent-encoded), so no key can take it.
 */
const BOARD_NODE = 'nest-locked:board';

/** What the board's source needs of the ZooKeeper backend of one group. */
export interface ZooKeeperBoardBackend {
  readonly zk: ZooKeeperDriver;
  readonly session: ZooKeeperSession;
  readonly group: string;
  readonly root: string;
  readonly keyPrefix: string;
  /** This process's token prefix (the middle of its nodes' names). */
  readonly instance: string;
  /** A key's parent node. */
  parentOf(key: string): string;
}

/** A line's node with what its name tells. */
interface LineNode extends OrderedEntry {
  readonly name: string;
}

/**
 * The lock board's reads on a ZooKeeper group: the children of the root (every key with a
 * line), and the children of each key's node (its holders and waiters in sequence order, each
 * named with its process's token); a holder's node stat gives its fence (the zxid that created
 * it) and since when it holds (its ctime). The instances publish their views as ephemeral
 * nodes under `<root>/nest-locked:board/<group>/` (a killed instance's view goes with its
 * session). A force release deletes the holder's node: the next waiter, which watches it,
 * takes the key; the holder finds its node gone at its next `extend`.
 * @internal
 */
export class ZooKeeperBoardSource implements BoardSource {
  readonly everyCaller = true;
  readonly queued = true;
  readonly views: ZooKeeperBoardViews;
  readonly legend =
    'ZooKeeper keeps a session, not a lease: "lease left" is the holder\'s own lease, from its published view.';

  constructor(private readonly backend: ZooKeeperBoardBackend) {
    this.views = new ZooKeeperBoardViews(backend, `${backend.root}/${BOARD_NODE}/${backend.group}`);
  }

  owner(): string {
    return this.backend.instance;
  }

  async serverTime(): Promise<number> {
    // Node ctimes are the ensemble's clock; the board has no cheaper read of it than its own.
    return Date.now();
  }

  async scan(search: string, maxScan: number): Promise<BoardScan> {
    const { keyPrefix, root } = this.backend;
    const names = await this.children(root);
    const keys: string[] = [];
    for (const name of names.slice(0, maxScan)) {
      if (name.includes(':')) continue;
      const full = decodeURIComponent(name);
      if (!full.startsWith(keyPrefix)) continue;
      const key = full.slice(keyPrefix.length);
      if (key.includes(search)) keys.push(key);
    }
    keys.sort();
    return { ...heldAndWaited(keys, await this.read(keys)), complete: names.length <= maxScan };
  }

  async held(keys: readonly string[]): Promise<BoardHeldKey[]> {
    const lines = await this.read(keys);
    const rows = await Promise.all(
      keys.map(async (key): Promise<BoardHeldKey | undefined> => {
        const { holding } = splitLine(lines.get(key) ?? []);
        if (holding.length === 0) return undefined;
        const parent = this.backend.parentOf(key);
        const holders = await Promise.all(
          holding.map(async (n): Promise<BoardHolder> => {
            const stat = await this.stat(`${parent}/${n.name}`);
            return {
              owner: n.owner,
              token: n.token,
              session: `${parent}/${n.name}`,
              ...(stat && {
                fence: Number(stat.czxid.readBigInt64BE(0)),
                since: Number(stat.ctime.readBigInt64BE(0)),
              }),
            };
          }),
        );
        return { key, mode: holding[0].mode, leaseLeftMs: null, holders };
      }),
    );
    return rows.filter((r): r is BoardHeldKey => r !== undefined);
  }

  async lines(keys: readonly string[], limit: number): Promise<BoardKeyLine[]> {
    return waitingLines(keys, await this.read(keys), limit);
  }

  async forceRelease(_key: string, holder: BoardHolder): Promise<boolean> {
    if (holder.session === undefined) return false;
    try {
      await this.backend.session.run((c, done: (e: unknown) => void) =>
        c.remove(holder.session!, -1, (e) => done(e)),
      );
      return true;
    } catch (error) {
      if (zkCode(error) === ZK.NO_NODE) return false;
      throw error;
    }
  }

  /** Each key's line, its nodes in sequence order. */
  private async read(keys: readonly string[]): Promise<Map<string, LineNode[]>> {
    const out = new Map<string, LineNode[]>();
    await Promise.all(
      keys.map(async (key) => {
        const children = await this.children(this.backend.parentOf(key));
        out.set(key, lockLine(children).map(withToken));
      }),
    );
    return out;
  }

  private async children(path: string): Promise<string[]> {
    try {
      return await this.backend.session.run((c, done: (e: unknown, r?: string[]) => void) =>
        c.getChildren(path, (e, r) => done(e, r)),
      );
    } catch (error) {
      if (zkCode(error) === ZK.NO_NODE) return [];
      throw error;
    }
  }

  private async stat(path: string): Promise<Zk.Stat | undefined> {
    return this.backend.session.run((c, done: (e: unknown, s?: Zk.Stat) => void) =>
      c.exists(path, (e, s) => done(e, s ?? undefined)),
    );
  }
}

/** A node with its token (`<kind>-<token>-<sequence>`), its process's prefix and its mode. */
function withToken(node: LockNode): LineNode {
  const token = node.name.slice(node.kind.length + 1, -11);
  const dot = token.lastIndexOf('.');
  const owner = dot < 0 ? token : token.slice(0, dot);
  return { name: node.name, token, owner, mode: modeOf(node.kind) };
}

function modeOf(kind: string): BoardMode {
  if (kind === 'write') return 'exclusive';
  return kind === 'read' ? 'read' : `permits ${Number(kind.slice('permits'.length))}`;
}

/**
 * The instances' views of a ZooKeeper group: one ephemeral node each, `<base>/<id>`, holding
 * its `viewRecord`; the base node's data is the time a page is open until.
 */
class ZooKeeperBoardViews implements BoardViewStore {
  constructor(
    private readonly backend: ZooKeeperBoardBackend,
    private readonly base: string,
  ) {}

  async publish(
    id: string,
    view: string,
    _events: readonly BoardPublishedEvent[],
    expiry: number,
  ): Promise<boolean> {
    const data = Buffer.from(viewRecord(view, Date.now() + expiry));
    const path = `${this.base}/${id}`;
    const { session, zk } = this.backend;
    try {
      await session.run((c, done: (e: unknown) => void) => c.setData(path, data, -1, done));
    } catch (error) {
      if (zkCode(error) !== ZK.NO_NODE) throw error;
      // First publish, or a new session: the node again (and its parents, which a sweep of
      // empty parents may have taken).
      await session.run((c, done: (e: unknown) => void) => c.mkdirp(this.base, (e) => done(e)));
      await session.run((c, done: (e: unknown) => void) =>
        c.create(path, data, zk.CreateMode.EPHEMERAL, (e) => done(e)),
      );
    }
    const watched = await session.run((c, done: (e: unknown, d?: Buffer) => void) =>
      c.getData(this.base, (e, d) => done(e, d ?? undefined)),
    );
    return Number(watched?.toString() ?? 0) > Date.now();
  }

  async watch(ms: number): Promise<void> {
    const data = Buffer.from(String(Date.now() + ms));
    await this.backend.session.run((c, done: (e: unknown) => void) =>
      c.setData(this.base, data, -1, (e) => done(e)),
    );
  }

  async withdraw(id: string): Promise<void> {
    await this.backend.session.run((c, done: (e: unknown) => void) =>
      c.remove(`${this.base}/${id}`, -1, (e) => done(e)),
    );
  }

  async views(): Promise<string[]> {
    const { session } = this.backend;
    let ids: string[];
    try {
      ids = await session.run((c, done: (e: unknown, r?: string[]) => void) =>
        c.getChildren(this.base, (e, r) => done(e, r)),
      );
    } catch (error) {
      if (zkCode(error) === ZK.NO_NODE) return [];
      throw error;
    }
    const now = Date.now();
    const read = await Promise.all(
      ids.map((id) =>
        session
          .run((c, done: (e: unknown, d?: Buffer) => void) =>
            c.getData(`${this.base}/${id}`, (e, d) => done(e, d ?? undefined)),
          )
          .catch(() => undefined),
      ),
    );
    return read.flatMap((data) => {
      const view = liveView(data?.toString() ?? '', now);
      return view === undefined ? [] : [view];
    });
  }
}
