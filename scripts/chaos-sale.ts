import { setTimeout as sleep } from 'node:timers/promises';
import type { LostPoint } from '../sample/products/chaos-hook';
import type { ChaosHookServer, PendingPurchase } from './chaos-hook-server';
import type { ChaosInstances } from './chaos-instances';
import { ShopLedger } from './chaos-ledger';
import type { ChaosSchedule, FaultKind } from './chaos-schedule';
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
  const created = await post<{ id: number }>(`${o.instances.nextUrl()}/products`, {
    name: `chaos-${o.row.mode}`,
    stock: o.stock,
  });
  if (created.status !== 201) {
    throw new Error(
      `Creating the product failed: ${created.status} ${JSON.stringify(created.body)}`,
    );
  }
  const ledger = new ShopLedger(o.dbPath);
  try {
    return await new ChaosSale(o, created.body.id, ledger).run();
  } finally {
    ledger.close();
  }
}

/** One row under way: the buyers, the purchase points the instances report, the faults. */
class ChaosSale {
  private readonly startedAt = Date.now();
  private readonly deadline: number;
  private readonly key: string;
  private readonly answers = new AnswersByFence();
  private readonly lostBefore: number;
  private readonly outcomes: FaultOutcome[] = [];
  private readonly failures: unknown[] = [];
  /** Set while a holder that lost its lock has yet to write. */
  private gate?: OvertakeGate;
  private reads = 0;
  /** The index of the next fault of the schedule. */
  private next = 0;
  /** A fault is going on: the next one waits for a later read. */
  private busy = false;
  private requests = 0;
  private cutOff = 0;
  private staleRejected = 0;

  constructor(
    private readonly o: ChaosSaleOptions,
    private readonly productId: number,
    private readonly ledger: ShopLedger,
  ) {
    this.deadline = this.startedAt + o.timeoutMs;
    this.key = `product:${productId}`;
    this.lostBefore = o.hook.lost.length;
  }

  private get faultsOver(): boolean {
    return this.next >= this.o.schedule.faults.length;
  }

  async run(): Promise<ChaosSaleResult> {
    this.o.hook.handlePurchases((p) => this.onPurchase(p));
    try {
      await Promise.all(Array.from({ length: this.o.buyers }, () => this.buyer()));
    } finally {
      this.o.hook.handlePurchases((p) => p.answer());
      this.gate?.open();
    }
    if (this.failures.length) throw this.failures[0];
    const { sold, finalStock, staleApplied } = this.ledger.tally(this.productId);
    return {
      row: this.o.row,
      productId: this.productId,
      stock: this.o.stock,
      sold,
      finalStock,
      oversold: Math.max(0, sold - this.o.stock),
      phantom: sold + finalStock - this.o.stock,
      staleApplied,
      staleRejected: this.staleRejected,
      faults: this.outcomes,
      lost: this.o.hook.lost.slice(this.lostBefore),
      requests: this.requests,
      cutOff: this.cutOff,
      wallMs: Date.now() - this.startedAt,
      timedOut: Date.now() >= this.deadline,
    };
  }

  /** One buyer: buys one unit again and again, on the next instance each time, until sold out. */
  private async buyer(): Promise<void> {
    const path = `/products/${this.productId}/purchase?mode=${this.o.row.mode}`;
    while (Date.now() < this.deadline) {
      let r: HttpResult<PurchaseAnswer>;
      this.requests++;
      try {
        const left = Math.max(1, this.deadline - Date.now());
        r = await post<PurchaseAnswer>(
          `${this.o.instances.nextUrl()}${path}`,
          { quantity: 1 },
          left,
        );
      } catch {
        this.cutOff++;
        await sleep(POLL_MS);
        continue;
      }
      this.answers.record(r.body?.fence, r.status);
      if (r.status === 201) continue;
      if (r.status === 409 && r.body?.code === 'STALE_FENCE') {
        this.staleRejected++;
        continue;
      }
      // Sold out: over once the faults are (a late write may still put stock back before).
      if (r.status === 409 && r.body?.code === 'INSUFFICIENT_STOCK' && this.faultsOver) return;
      await sleep(POLL_MS);
    }
  }

  /** A purchase of this row at one of its points: go on, be held, or be the next fault's. */
  private onPurchase(p: PendingPurchase): void {
    if (p.productId !== this.productId) return p.answer();
    if (p.point === 'holding') {
      if (!this.gate || this.gate.admit(p)) p.answer();
      return;
    }
    this.reads++;
    const due = this.o.schedule.faults[this.next];
    if (this.busy || !due || this.reads < due.atRead || p.fence === undefined) return p.answer();
    this.busy = true;
    this.inject(due.kind, p, this.reads)
      .then(
        (outcome) => this.outcomes.push(outcome),
        (err: unknown) => this.failures.push(err),
      )
      .finally(() => {
        p.answer();
        this.gate?.open();
        this.gate = undefined;
        this.busy = false;
        this.next++;
      });
  }

  private async inject(kind: FaultKind, p: PendingPurchase, read: number): Promise<FaultOutcome> {
    const done = { kind, read, instance: p.instance, pid: p.pid, fence: p.fence! };
    switch (kind) {
      case 'stall':
        return { ...done, ...(await this.stall(p, read)) };
      case 'redis-restart':
        return { ...done, ...(await this.restartRedis(p, read)) };
      case 'kill':
        return { ...done, ...(await this.kill(p, read)) };
    }
  }

  /** SIGSTOP the holder past its lease while newer holders sell, then SIGCONT: its late write. */
  private async stall(p: PendingPurchase, read: number): Promise<Partial<FaultOutcome>> {
    const stoppedAt = Date.now();
    this.gate = new OvertakeGate(p.fence!, this.o.schedule.newerSales);
    this.o.instances.freeze(p.pid);
    this.o.log(`  read ${read}: ${this.holder(p)}: SIGSTOP`);
    const sold = await this.newerSales(p.fence!, this.o.schedule.newerSales);
    const left = stoppedAt + this.o.schedule.stallMs - Date.now();
    if (left > 0) await sleep(left);
    const resumedAt = Date.now();
    this.o.instances.resume(p.pid);
    const [heard, write] = await Promise.all([this.learned(p, resumedAt), this.letWrite(p)]);
    this.o.log(
      `    lease ran out; ${this.sales(sold)}; SIGCONT after ${seconds(resumedAt - stoppedAt)}; ` +
        `${told(heard, 'later')}; late write ${write}`,
    );
    return { ...heard, lateWrite: write };
  }

  /** Redis forgets the lock under its holder; the holder writes once told and overtaken. */
  private async restartRedis(p: PendingPurchase, read: number): Promise<Partial<FaultOutcome>> {
    this.gate = new OvertakeGate(p.fence!, this.o.schedule.newerSales);
    this.o.log(`  read ${read}: ${this.holder(p)}: Redis restarted`);
    await this.o.redis.restart();
    const upAt = Date.now();
    const [heard, sold] = await Promise.all([
      this.learned(p, upAt),
      this.newerSales(p.fence!, this.o.schedule.newerSales),
    ]);
    const write = await this.letWrite(p);
    this.o.log(
      `    Redis back, empty; ${this.sales(sold)}; ${told(heard, 'after the restart')}; ` +
        `late write ${write}`,
    );
    return { ...heard, lateWrite: write };
  }

  /** SIGKILL the holder and start its instance again; its lock frees when the lease ends. */
  private async kill(p: PendingPurchase, read: number): Promise<Partial<FaultOutcome>> {
    const killedAt = Date.now();
    this.o.log(`  read ${read}: ${this.holder(p)}: SIGKILL`);
    // The sale goes on while the instance starts again (the buyers use it once it is up).
    void this.o.instances.killAndRestart(p.pid).then(
      (back) =>
        this.o.log(
          `    ${back.name} started again, pid ${back.pid}, ${seconds(Date.now() - killedAt)} after`,
        ),
      (err: unknown) => this.failures.push(err),
    );
    p.answer();
    const sold = await this.newerSales(p.fence!, 1);
    this.o.log(
      sold
        ? `    lease ran out; the next holder sold ${seconds(sold - killedAt)} after`
        : '    nobody sold after it',
    );
    return { lateWrite: 'none' };
  }

  /** Ms left for a wait: `WAIT_MS`, or less near the row's deadline. */
  private waitMs(): number {
    return Math.max(0, Math.min(WAIT_MS, this.deadline - Date.now()));
  }

  /** `Date.now()` once `count` sales under a fence above `fence` are in; `undefined`: bound hit. */
  private async newerSales(fence: number, count: number): Promise<number | undefined> {
    const until = Date.now() + this.waitMs();
    while (Date.now() < until) {
      if (this.ledger.salesAfter(this.productId, fence) >= count) return Date.now();
      await sleep(POLL_MS);
    }
    return undefined;
  }

  /** When `p`'s process reported its lock lost, in ms after `since`. */
  private async learned(p: PendingPurchase, since: number): Promise<Partial<FaultOutcome>> {
    const where = (l: LostPoint) => l.pid === p.pid && l.fence === p.fence;
    const lost = await this.o.hook.lostWhere(where, this.waitMs());
    return lost ? { learnedMs: lost.at - since, learnedReason: lost.reason } : {};
  }

  /** `p`'s late write at last; once it is answered, the next holders may read again. */
  private async letWrite(p: PendingPurchase): Promise<FaultOutcome['lateWrite']> {
    p.answer();
    const status = await this.answers.waitFor(p.fence!, this.waitMs());
    this.gate?.open();
    this.gate = undefined;
    // Only a sale (201) and a refused fenced write (409 STALE_FENCE) answer with a fence.
    return status === 201 ? 'applied' : status === 409 ? 'rejected' : 'none';
  }

  private holder(p: PendingPurchase): string {
    return `${p.instance} (pid ${p.pid}) holds ${this.key} (fence ${p.fence}), read stock ${p.stock}`;
  }

  private sales(done: number | undefined): string {
    const k = this.o.schedule.newerSales;
    return done ? `${k} newer sales` : `not ${k} newer sales within ${seconds(WAIT_MS)}`;
  }
}

const told = (f: Partial<FaultOutcome>, after: string): string =>
  f.learnedMs === undefined ? 'never told' : `told ${f.learnedMs} ms ${after} (${f.learnedReason})`;
