import type { Etcd3, IKeyValue } from 'etcd3';
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
import { linePrefix, OTHER_PART, prefixEnd, READ_PART } from './etcd-names';
import type { EtcdSession } from './etcd-session';

/** What the board's source needs of the etcd backend of one group. */
export interface EtcdBoardBackend {
  readonly client: Etcd3;
  readonly group: string;
  readonly keyPrefix: string;
  /** The session of this process right now, if one is open or opening. */
  session(): Promise<EtcdSession> | undefined;
}

/** One hold or waiting place of a line, as found in etcd (its token: the etcd key). */
interface LineEntry extends OrderedEntry {
  readonly key: string;
  readonly revision: bigint;
  readonly lease: string;
}

/**
 * The lock board's reads on an etcd group: one range over the lock lines of the prefix (every
 * holder and waiter key of every process, with its lease and create revision: the line in
 * order, the create revision being the fence), and the views the instances publish under
 * `<keyPrefix>\0board/<group>/`, each bound to a lease of the view's expiry (a killed
 * instance's view goes with it). A force release deletes the holder's key: the next waiter,
 * which watches it, takes the key; the holder finds its hold lost at its next `extend`.
 * @internal
 */
export class EtcdBoardSource implements BoardSource {
  readonly everyCaller = true;
  readonly queued = true;
  readonly views: EtcdBoardViews;
  readonly legend =
    'etcd keeps no time of a hold: "held for" comes from the holder\'s published view (— until it publishes); lease left is its session lease.';
  private hex?: string;

  constructor(private readonly backend: EtcdBoardBackend) {
    this.views = new EtcdBoardViews(
      backend.client,
      `${backend.keyPrefix}\0board/${backend.group}/`,
    );
  }

  owner(): string | undefined {
    // The session may change (a new one after a loss): the next publish tells the new one.
    this.backend
      .session()
      ?.then((s) => (this.hex = s.hex))
      .catch(() => undefined);
    return this.hex;
  }

  async serverTime(): Promise<number> {
    // etcd keeps no clock the board could read; no time of this source is the server's.
    return Date.now();
  }

  async scan(search: string, maxScan: number): Promise<BoardScan> {
    const { keyPrefix } = this.backend;
    // Every line starts with a digit (the key's length): [prefix + '0', prefix + ':').
    const res = await this.backend.client.kv.range({
      key: Buffer.from(`${keyPrefix}0`),
      range_end: Buffer.from(`${keyPrefix}:`),
      keys_only: true,
      limit: maxScan,
    });
    const keys = new Set<string>();
    for (const kv of res.kvs) {
      const key = keyOfName(keyPrefix, kv.key.toString());
      if (key !== undefined && key.includes(search)) keys.add(key);
    }
    const sorted = [...keys].sort();
    return { ...heldAndWaited(sorted, await this.read(sorted)), complete: !res.more };
  }

  async held(keys: readonly string[]): Promise<BoardHeldKey[]> {
    const lines = await this.read(keys);
    const leases = await this.leasesLeft(
      [...lines.values()].flatMap((line) => splitLine(line).holding),
    );
    return keys.flatMap((key): BoardHeldKey[] => {
      const { holding } = splitLine(lines.get(key) ?? []);
      if (holding.length === 0) return [];
      const left = Math.min(...holding.map((e) => leases.get(e.lease) ?? Infinity));
      return [
        {
          key,
          mode: holding[0].mode,
          leaseLeftMs: Number.isFinite(left) ? left : null,
          holders: holding.map(holderOf),
        },
      ];
    });
  }

  async lines(keys: readonly string[], limit: number): Promise<BoardKeyLine[]> {
    return waitingLines(keys, await this.read(keys), limit);
  }

  async forceRelease(key: string, holder: BoardHolder): Promise<boolean> {
    if (holder.token === undefined || holder.fence === undefined) return false;
    // Deleted only if it is still that hold's key (the same create revision).
    const res = await this.backend.client.kv.txn({
      compare: [
        {
          key: Buffer.from(holder.token),
          target: 'Create',
          result: 'Equal',
          create_revision: String(holder.fence),
        },
      ],
      success: [{ request_delete_range: { key: Buffer.from(holder.token) } }],
    });
    return res.succeeded;
  }

  async close(): Promise<void> {
    await this.views.close();
  }

  /** The entries of each key's line, in create order. */
  private async read(keys: readonly string[]): Promise<Map<string, LineEntry[]>> {
    const { client, keyPrefix } = this.backend;
    const out = new Map<string, LineEntry[]>();
    await Promise.all(
      keys.map(async (key) => {
        const prefix = Buffer.from(linePrefix(keyPrefix, key));
        const res = await client.kv.range({
          key: prefix,
          range_end: prefixEnd(prefix),
          sort_order: 'Ascend',
          sort_target: 'Create',
        });
        out.set(
          key,
          res.kvs.flatMap((kv) => entryOf(key, prefix.length, kv)),
        );
      }),
    );
    return out;
  }

  /** What is left of each lease, ms (one `LeaseTimeToLive` per lease). */
  private async leasesLeft(entries: readonly LineEntry[]): Promise<Map<string, number>> {
    const ids = [...new Set(entries.map((e) => e.lease))];
    const left = new Map<string, number>();
    await Promise.all(
      ids.map(async (id) => {
        const res = await this.backend.client.leaseClient.leaseTimeToLive({ ID: id });
        if (Number(res.TTL) >= 0) left.set(id, Number(res.TTL) * 1000);
      }),
    );
    return left;
  }
}

/** The lock key of an etcd key of a line (`<keyPrefix><length>:<key>/...`). */
function keyOfName(keyPrefix: string, name: string): string | undefined {
  const rest = name.slice(keyPrefix.length);
  const colon = rest.indexOf(':');
  const length = Number(rest.slice(0, colon));
  if (colon <= 0 || !Number.isInteger(length)) return undefined;
  const key = rest.slice(colon + 1, colon + 1 + length);
  return rest[colon + 1 + length] === '/' ? key : undefined;
}

/** A line's key as an entry; none for a key that is not a hold's. */
function entryOf(key: string, prefixLength: number, kv: IKeyValue): LineEntry[] {
  const name = kv.key.toString();
  const part = name.slice(prefixLength, prefixLength + READ_PART.length);
  if (part !== READ_PART && part !== OTHER_PART) return [];
  const own = name.slice(prefixLength + part.length);
  const dot = own.lastIndexOf('.');
  return [
    {
      key,
      token: name,
      owner: dot < 0 ? own : own.slice(0, dot),
      mode: modeOf(kv.value.toString()),
      revision: BigInt(kv.create_revision),
      lease: kv.lease,
    },
  ];
}

function holderOf(e: LineEntry): BoardHolder {
  return { owner: e.owner, token: e.token, fence: Number(e.revision) };
}

function modeOf(kind: string): BoardMode {
  if (kind === 'w') return 'exclusive';
  return kind === 'r' ? 'read' : `permits ${Number(kind)}`;
}

/**
 * The instances' views of an etcd group: one key each, `<base><id>`, holding
 * its `viewRecord`, bound to a lease of this process that lives the view's expiry; the
 * page's open mark is `<base>\0watched` holding the time it lasts until.
 */
class EtcdBoardViews implements BoardViewStore {
  private lease?: ReturnType<Etcd3['lease']>;

  constructor(
    private readonly client: Etcd3,
    private readonly base: string,
  ) {}

  async publish(
    id: string,
    view: string,
    _events: readonly BoardPublishedEvent[],
    expiry: number,
  ): Promise<boolean> {
    if (!this.lease) {
      const lease = this.client.lease(Math.max(1, Math.ceil(expiry / 1000)), {
        autoKeepAlive: true,
      });
      // A lease lost (etcd unreachable past its TTL) is replaced at the next publish.
      lease.on('lost', () => {
        if (this.lease === lease) this.lease = undefined;
      });
      this.lease = lease;
    }
    await this.lease.put(this.base + id).value(viewRecord(view, Date.now() + expiry));
    const watched = await this.client.get(`${this.base}\0watched`).string();
    return watched !== null && Number(watched) > Date.now();
  }

  async watch(ms: number): Promise<void> {
    await this.client.put(`${this.base}\0watched`).value(String(Date.now() + ms));
  }

  async withdraw(id: string): Promise<void> {
    await this.client.delete().key(this.base + id);
  }

  async views(): Promise<string[]> {
    const all = await this.client.getAll().prefix(this.base).strings();
    const now = Date.now();
    return Object.entries(all).flatMap(([name, value]) => {
      const view = name.endsWith('\0watched') ? undefined : liveView(value, now);
      return view === undefined ? [] : [view];
    });
  }

  async close(): Promise<void> {
    await this.lease?.revoke().catch(() => undefined);
  }
}
