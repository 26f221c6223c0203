import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import type { LostPoint } from '../sample/products/chaos-hook';
import type { ChaosHookServer, PendingPurchase } from './chaos-hook-server';
import type { ChaosInstances } from './chaos-instances';
import type { ChaosSchedule, FaultKind, ScheduledFault } from './chaos-schedule';
import { type HttpResult, post } from './http';

/**
 * One row of the chaos demo: a flash sale of one product by a crowd of buyers across the
 * instances, through one purchase mode, while the schedule's faults hit the holders of the
 * product lock at the reads it names. What it sold and what the faults did is read back from the
 * shared database and from the answers the buyers got.
 */

/** The two rows: the same sale and faults, with and without the fenced write. */
export const CHAOS_ROWS = [
  { label: 'lock only', mode: 'product' },
  { label: 'lock + fenced write', mode: 'fenced' },
] as const;
export type ChaosRow = (typeof CHAOS_ROWS)[number];

/** The Redis the instances lock on, restartable with its data gone (no persistence). */
export interface ChaosRedis {
  readonly url: string;
  restart(): Promise<void>;
}

export interface ChaosSaleOptions {
  readonly row: ChaosRow;
  readonly schedule: ChaosSchedule;
  /** Units on sale. */
  readonly stock: number;
  /** Buyers buying at once, one unit each, again and again until the sale is over. */
  readonly buyers: number;
  readonly instances: ChaosInstances;
  readonly redis: ChaosRedis;
  readonly hook: ChaosHookServer;
  /** The instances' SQLite file, read to see what they wrote. */
  readonly dbPath: string;
  /** Told a line for every fault as it happens. */
  readonly log: (line: string) => void;
  /** The whole row ends within this, whatever happens. */
  readonly timeoutMs: number;
}

/** What one fault did and what its holder made of it. */
export interface FaultOutcome {
  readonly kind: FaultKind;
  /** The read it hit (later than scheduled when the previous fault was still going on). */
  readonly read: number;
  readonly instance: string;
  readonly pid: number;
  /** The fence of the product lock the holder had. */
  readonly fence: number;
  /**
   * Ms from the end of the fault (SIGCONT; Redis answering again) to the moment the holder's
   * lock was reported lost (its signal aborted, the `lost` event); `undefined`: never reported
   * (a killed holder cannot).
   */
  readonly learnedMs?: number;
  /** `LockLostError.reason` of that report. */
  readonly learnedReason?: string;
  /** What became of the holder's write: it wrote after a newer holder did, or was refused. */
  readonly lateWrite?: 'applied' | 'rejected' | 'none';
}

export interface ChaosSaleResult {
  readonly row: ChaosRow;
  readonly productId: number;
  readonly stock: number;
  /** Units in orders. */
  readonly sold: number;
  readonly finalStock: number;
  /** Sold beyond the stock. */
  readonly oversold: number;
  /** `sold + finalStock - stock`: units that came from nowhere, when writes were lost. */
  readonly phantom: number;
  /** Orders written with an older fence than an order written before them. */
  readonly staleApplied: number;
  /** Sales refused by the fenced write (409 `STALE_FENCE`). */
  readonly staleRejected: number;
  readonly faults: readonly FaultOutcome[];
  /** Every lost lock the instances reported during the row. */
  readonly lost: readonly LostPoint[];
  readonly requests: number;
  /** Requests that got no answer (their instance was killed under them). */
  readonly cutOff: number;
  readonly wallMs: number;
  /** The row hit `timeoutMs` before the sale and its faults were over. */
  readonly timedOut: boolean;
}

const POLL_MS = 20;
/** Bound of every wait for something an instance should do (newer sales, a lost report). */
const WAIT_MS = 15_000;

const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;

interface PurchaseAnswer {
  readonly code?: string;
  readonly fence?: number;
}

/** The answers the buyers got, by the fence they carry, for the faults to wait on. */
class AnswersByFence {
  private readonly seen = new Map<number, number>();
  private readonly waiting = new Map<number, (status: number) => void>();

  record(fence: number | undefined, status: number): void {
    if (fence === undefined) return;
    this.seen.set(fence, status);
    this.waiting.get(fence)?.(status);
  }

  /** The status of the first answer carrying `fence`, or `undefined` after `ms`. */
  async waitFor(fence: number, ms: number): Promise<number | undefined> {
    const seen = this.seen.get(fence);
    if (seen !== undefined) return seen;
    let timer: NodeJS.Timeout | undefined;
    const status = await new Promise<number | undefined>((resolve) => {
      this.waiting.set(fence, resolve);
      timer = setTimeout(() => resolve(undefined), ms);
    });
    clearTimeout(timer);
    this.waiting.delete(fence);
    return status;
  }
}

/**
 * While a holder that lost its lock has not written yet: lets `allow` purchases of newer
 * holders (a fence above its own) start, then holds the next ones before they read, until
 * `open()`. So the late write comes after exactly that many newer sales and before the next
 * read, instead of in the middle of a sale that would overwrite it.
 */
class OvertakeGate {
  private held: PendingPurchase[] = [];

  constructor(
    private readonly fence: number,
    private allow: number,
  ) {}

  /** `false`: held until `open()`. */
  admit(p: PendingPurchase): boolean {
    if (p.fence === undefined || p.fence <= this.fence) return true;
    if (this.allow > 0) {
      this.allow--;
      return true;
    }
    this.held.push(p);
    return false;
  }

  open(): void {
    for (const p of this.held) p.answer();
    this.held = [];
  }
}

/** Runs one row: the sale, the faults at their reads, and the count afterwards. */
export async function runChaosSale(o: ChaosSaleOptions): Promise<ChaosSaleResult> {
  const startedAt = Date.now();
  const deadline = startedAt + o.timeoutMs;
  const created = await post<{ id: number }>(`${o.instances.nextUrl()}/products`, {
    name: `chaos-${o.row.mode}`,
    stock: o.stock,
  });
  if (created.status !== 201) {
    throw new Error(
      `Creating the product failed: ${created.status} ${JSON.stringify(created.body)}`,
    );
  }
  const productId = created.body.id;
  const key = `product:${productId}`;
  const db = new Database(o.dbPath, { readonly: true, fileMustExist: true });
  db.pragma('busy_timeout = 10000');
  const newerCount = db.prepare<[number, number], { n: number }>(
    'SELECT COUNT(*) AS n FROM orders WHERE product_id = ? AND fence > ?',
  );
  const waitMs = () => Math.max(0, Math.min(WAIT_MS, deadline - Date.now()));
  /** `Date.now()` once `count` orders with a fence above `fence` are in; `undefined`: bound hit. */
  const newerSales = async (fence: number, count: number): Promise<number | undefined> => {
    const until = Date.now() + waitMs();
    while (Date.now() < until) {
      if ((newerCount.get(productId, fence)?.n ?? 0) >= count) return Date.now();
      await sleep(POLL_MS);
    }
    return undefined;
  };
  const answers = new AnswersByFence();
  const lostBefore = o.hook.lost.length;
  const outcomes: FaultOutcome[] = [];
  const failures: unknown[] = [];
  let faultsOver = o.schedule.faults.length === 0;
  let gate: OvertakeGate | undefined;
  const k = o.schedule.newerSales;

  const lateWrite = async (fence: number): Promise<FaultOutcome['lateWrite']> => {
    const status = await answers.waitFor(fence, waitMs());
    return status === 201 ? 'applied' : status === 409 ? 'rejected' : 'none';
  };
  const learned = async (p: PendingPurchase, since: number) => {
    const lost = await o.hook.lostWhere((l) => l.pid === p.pid && l.fence === p.fence, waitMs());
    return lost ? { learnedMs: lost.at - since, learnedReason: lost.reason } : {};
  };
  /** The late write of `p` at last, then the next holders may read again. */
  const letWrite = async (p: PendingPurchase): Promise<FaultOutcome['lateWrite']> => {
    p.answer();
    const write = await lateWrite(p.fence!);
    gate?.open();
    gate = undefined;
    return write;
  };
  const holder = (p: PendingPurchase) =>
    `${p.instance} (pid ${p.pid}) holds ${key} (fence ${p.fence}), read stock ${p.stock}`;
  const sales = (done: number | undefined) =>
    done ? `${k} newer sales` : `not ${k} newer sales within ${seconds(WAIT_MS)}`;
  const told = (f: { learnedMs?: number; learnedReason?: string }, after: string) =>
    f.learnedMs === undefined
      ? 'never told'
      : `told ${f.learnedMs} ms ${after} (${f.learnedReason})`;
  const outcome = (kind: FaultKind, p: PendingPurchase, n: number, rest: Partial<FaultOutcome>) =>
    ({ kind, read: n, instance: p.instance, pid: p.pid, fence: p.fence!, ...rest }) as FaultOutcome;

  const faults: Record<FaultKind, (p: PendingPurchase, n: number) => Promise<FaultOutcome>> = {
    stall: async (p, n) => {
      const stoppedAt = Date.now();
      gate = new OvertakeGate(p.fence!, k);
      o.instances.freeze(p.pid);
      o.log(`  read ${n}: ${holder(p)}: SIGSTOP`);
      const sold = await newerSales(p.fence!, k);
      const left = stoppedAt + o.schedule.stallMs - Date.now();
      if (left > 0) await sleep(left);
      const resumedAt = Date.now();
      o.instances.resume(p.pid);
      const [heard, write] = await Promise.all([learned(p, resumedAt), letWrite(p)]);
      o.log(
        `    lease ran out; ${sales(sold)}; SIGCONT after ${seconds(resumedAt - stoppedAt)}; ` +
          `${told(heard, 'later')}; late write ${write}`,
      );
      return outcome('stall', p, n, { ...heard, lateWrite: write });
    },
    'redis-restart': async (p, n) => {
      gate = new OvertakeGate(p.fence!, k);
      o.log(`  read ${n}: ${holder(p)}: Redis restarted`);
      await o.redis.restart();
      const upAt = Date.now();
      const [heard, sold] = await Promise.all([learned(p, upAt), newerSales(p.fence!, k)]);
      const write = await letWrite(p);
      o.log(
        `    Redis back, empty; ${sales(sold)}; ${told(heard, 'after the restart')}; ` +
          `late write ${write}`,
      );
      return outcome('redis-restart', p, n, { ...heard, lateWrite: write });
    },
    kill: async (p, n) => {
      const killedAt = Date.now();
      o.log(`  read ${n}: ${holder(p)}: SIGKILL`);
      // The sale goes on while the instance starts again (the buyers use it once it is up).
      void o.instances.killAndRestart(p.pid).then(
        (back) =>
          o.log(
            `    ${back.name} started again, pid ${back.pid}, ${seconds(Date.now() - killedAt)} after`,
          ),
        (err: unknown) => failures.push(err),
      );
      p.answer();
      const sold = await newerSales(p.fence!, 1);
      o.log(
        `    ${sold ? `lease ran out; the next holder sold ${seconds(sold - killedAt)} after` : 'nobody sold after it'}`,
      );
      return outcome('kill', p, n, { lateWrite: 'none' });
    },
  };

  let reads = 0;
  let next = 0;
  let busy = false;
  o.hook.handlePurchases((p) => {
    if (p.productId !== productId) return p.answer();
    if (p.point === 'holding') {
      if (!gate || gate.admit(p)) p.answer();
      return;
    }
    reads++;
    const due: ScheduledFault | undefined = o.schedule.faults[next];
    if (busy || !due || reads < due.atRead || p.fence === undefined) return p.answer();
    busy = true;
    faults[due.kind](p, reads)
      .then(
        (outcome) => outcomes.push(outcome),
        (err: unknown) => failures.push(err),
      )
      .finally(() => {
        p.answer();
        gate?.open();
        gate = undefined;
        busy = false;
        next++;
        faultsOver = next >= o.schedule.faults.length;
      });
  });

  let requests = 0;
  let cutOff = 0;
  let staleRejected = 0;
  const buyer = async (): Promise<void> => {
    while (Date.now() < deadline) {
      let r: HttpResult<PurchaseAnswer>;
      requests++;
      try {
        const url = `${o.instances.nextUrl()}/products/${productId}/purchase?mode=${o.row.mode}`;
        r = await post<PurchaseAnswer>(url, { quantity: 1 }, Math.max(1, deadline - Date.now()));
      } catch {
        cutOff++;
        await sleep(POLL_MS);
        continue;
      }
      answers.record(r.body?.fence, r.status);
      if (r.status === 201) continue;
      if (r.status === 409 && r.body?.code === 'STALE_FENCE') {
        staleRejected++;
        continue;
      }
      // Sold out: over once the faults are (a late write may still put stock back before).
      if (r.status === 409 && r.body?.code === 'INSUFFICIENT_STOCK' && faultsOver) return;
      await sleep(POLL_MS);
    }
  };
  try {
    await Promise.all(Array.from({ length: o.buyers }, buyer));
  } finally {
    o.hook.handlePurchases((p) => p.answer());
    gate?.open();
  }
  if (failures.length) throw failures[0];

  try {
    const view = db
      .prepare<[number], { stock: number; sold: number }>(
        `SELECT p.stock, COALESCE(SUM(o.quantity), 0) AS sold
           FROM products p LEFT JOIN orders o ON o.product_id = p.id
          WHERE p.id = ? GROUP BY p.id`,
      )
      .get(productId)!;
    const fences = db
      .prepare<[number], { fence: number }>(
        'SELECT fence FROM orders WHERE product_id = ? ORDER BY id',
      )
      .all(productId)
      .map((r) => r.fence);
    let newestSoFar = -Infinity;
    let staleApplied = 0;
    for (const f of fences) {
      if (f < newestSoFar) staleApplied++;
      newestSoFar = Math.max(newestSoFar, f);
    }
    return {
      row: o.row,
      productId,
      stock: o.stock,
      sold: view.sold,
      finalStock: view.stock,
      oversold: Math.max(0, view.sold - o.stock),
      phantom: view.sold + view.stock - o.stock,
      staleApplied,
      staleRejected,
      faults: outcomes,
      lost: o.hook.lost.slice(lostBefore),
      requests,
      cutOff,
      wallMs: Date.now() - startedAt,
      timedOut: Date.now() >= deadline,
    };
  } finally {
    db.close();
  }
}
