import { performance } from 'node:perf_hooks';
import { formatTable, percentile, Progress } from './demo-progress';
import { burst, type BurstResult, get, type HttpRequest, type HttpResult, post } from './http';
import type { SampleCluster } from './sample-cluster';

/**
 * The demo's shared holds: readers of a product under read locks while it is restocked, and
 * payments through a gateway that refuses more than 3 calls at once, under `permits: 3`. Each
 * against the same load with the exclusive lock or with no lock.
 */

/** `?lock=` of `GET /products/:id`, and of the restocks sent with the reads. */
export const READ_VARIANTS = [
  { lock: 'read', restock: 'write', how: "mode: 'read' for reads, the write lock for restocks" },
  { lock: 'write', restock: 'write', how: 'the exclusive lock for reads and restocks alike' },
  { lock: 'none', restock: 'none', how: 'no lock: reads can fall between the two restock writes' },
] as const;
type ReadVariant = (typeof READ_VARIANTS)[number];

export const PAY_VARIANTS = [
  { lock: 'permits', how: 'permits: 3 on the gateway call, across all instances' },
  { lock: 'none', how: 'no guard: every payment calls the gateway at once' },
] as const;
type PayVariant = (typeof PAY_VARIANTS)[number];

/** One restock after every this many reads. */
const READS_PER_RESTOCK = 20;

export interface ReadsResult {
  readonly lock: ReadVariant['lock'];
  readonly reads: number;
  readonly restocks: number;
  /** Reads whose price and stock came from different restocks. */
  readonly torn: number;
  readonly readsPerSecond: number;
  readonly p50: number;
  readonly p99: number;
  /** Answers other than 200 (reads and restocks). */
  readonly failed: number;
}

export interface PaymentsResult {
  readonly lock: PayVariant['lock'];
  readonly payments: number;
  readonly paid: number;
  /** 503 PAYMENT_GATEWAY_BUSY: the gateway had 3 calls in progress already. */
  readonly refused: number;
  /** The most calls the gateway had in progress at once. */
  readonly maxInFlight: number;
  readonly paymentsPerSecond: number;
  readonly p99: number;
  /** Answers other than 200 and 503. */
  readonly failed: number;
}

const fail = (what: string, r: BurstResult | HttpResult): never => {
  const body = 'body' in r ? JSON.stringify(r.body) : (r as { error: Error }).error.message;
  throw new Error(`${what} failed: ${r.status} ${body}`);
};

/**
 * `readers` reads of one product spread over the instances, with a restock after every 20 (each
 * writing a new stock and price), all sent at once.
 */
export async function runReads(
  variant: ReadVariant,
  cluster: SampleCluster,
  readers: number,
): Promise<ReadsResult> {
  const { urls } = cluster;
  const created = await post<{ id: number }>(`${urls[0]}/products`, {
    name: `shelf-${variant.lock}`,
    stock: 10,
    price: 100,
  });
  if (created.status !== 201) fail('Creating the product', created);
  const id = created.body.id;
  const restocks = Math.max(1, Math.floor(readers / READS_PER_RESTOCK));
  const total = readers + restocks;
  // Restocks evenly among the reads: request i is a restock when it ends a group of 20 reads.
  const every = Math.floor(total / restocks);
  const isRestock = (i: number) => i % every === every - 1 && Math.floor(i / every) < restocks;
  const request = (i: number): HttpRequest =>
    isRestock(i)
      ? {
          method: 'POST',
          url: `${urls[i % urls.length]}/products/${id}/restock?lock=${variant.restock}`,
          body: { stock: 10 + i, price: 100 + i },
          timeoutMs: 90_000,
        }
      : {
          method: 'GET',
          url: `${urls[i % urls.length]}/products/${id}?lock=${variant.lock}`,
          timeoutMs: 90_000,
        };
  // Untimed, the same mix: every instance's first calls of this kind (script loads, JIT) are
  // not part of the figures, so the first variant is not the only one measured cold.
  await burst(Math.min(total, 3 * (READS_PER_RESTOCK + 1)), request);
  const progress = new Progress(`read ${variant.lock}`, total);
  const startedAt = performance.now();
  const results = await burst(total, request, (done, r) => progress.update(done, r));
  const wallMs = performance.now() - startedAt;
  progress.end();
  const reads = results.filter((_, i) => !isRestock(i));
  const latencies = reads.map((r) => r.ms).sort((a, b) => a - b);
  return {
    lock: variant.lock,
    reads: reads.length,
    restocks,
    torn: reads.filter((r) => r.status === 200 && (r as HttpResult).body?.torn === true).length,
    readsPerSecond: reads.length / (wallMs / 1000),
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    failed: results.filter((r) => r.status !== 200).length,
  };
}

/** `payers` orders (bought first, not timed), then all paid at once across the instances. */
export async function runPayments(
  variant: PayVariant,
  cluster: SampleCluster,
  payers: number,
): Promise<PaymentsResult> {
  const { urls } = cluster;
  const created = await post<{ id: number }>(`${urls[0]}/products`, {
    name: `pay-${variant.lock}`,
    stock: payers,
    price: 500,
  });
  if (created.status !== 201) fail('Creating the product', created);
  const orders = await burst(payers, (i) => ({
    method: 'POST',
    url: `${urls[i % urls.length]}/products/${created.body.id}/purchase?mode=segmented`,
    body: { quantity: 1 },
    timeoutMs: 90_000,
  }));
  const notBought = orders.find((r) => r.status !== 201);
  if (notBought) fail('Buying the orders to pay', notBought);
  const reset = await post(`${urls[0]}/gateway/stats/reset`);
  if (reset.status !== 200) fail('Resetting the gateway', reset);

  const progress = new Progress(`pay ${variant.lock}`, payers);
  const startedAt = performance.now();
  const results = await burst(
    payers,
    (i) => ({
      method: 'POST',
      url: `${urls[i % urls.length]}/orders/${(orders[i] as HttpResult).body.orderId}/pay?lock=${variant.lock}`,
      timeoutMs: 90_000,
    }),
    (done, r) => progress.update(done, r),
  );
  const wallMs = performance.now() - startedAt;
  progress.end();
  const stats = await get<{ maxInFlight: number }>(`${urls[0]}/gateway/stats`);
  if (stats.status !== 200) fail('Reading the gateway', stats);
  const latencies = results.map((r) => r.ms).sort((a, b) => a - b);
  const paid = results.filter((r) => r.status === 200).length;
  const refused = results.filter((r) => r.status === 503).length;
  return {
    lock: variant.lock,
    payments: payers,
    paid,
    refused,
    maxInFlight: stats.body.maxInFlight,
    paymentsPerSecond: payers / (wallMs / 1000),
    p99: percentile(latencies, 99),
    failed: payers - paid - refused,
  };
}

const int = (n: number) => Math.round(n).toLocaleString('en-US');

export function readsTable(rows: readonly ReadsResult[]): string[] {
  const label = { read: 'read lock', write: 'exclusive lock', none: 'no lock' } as const;
  return formatTable(
    ['reads', 'requests', 'restocks', 'torn reads', 'reads/s', 'p50', 'p99'],
    rows.map((r) => [
      label[r.lock],
      String(r.reads),
      String(r.restocks),
      String(r.torn),
      `${int(r.readsPerSecond)}/s`,
      `${int(r.p50)} ms`,
      `${int(r.p99)} ms`,
    ]),
  );
}

export function paymentsTable(rows: readonly PaymentsResult[]): string[] {
  const label = { permits: 'permits: 3', none: 'no guard' } as const;
  return formatTable(
    [
      'payments',
      'requests',
      'paid',
      'refused by gateway',
      'max at gateway at once',
      'paid/s',
      'p99',
    ],
    rows.map((r) => [
      label[r.lock],
      String(r.payments),
      String(r.paid),
      String(r.refused),
      String(r.maxInFlight),
      `${int((r.paymentsPerSecond * r.paid) / Math.max(1, r.payments))}/s`,
      `${int(r.p99)} ms`,
    ]),
  );
}

export function legendLines(): string[] {
  return [
    ...READ_VARIANTS.map(
      (v, i) => `${i === 0 ? 'reads:' : '      '} ${`?lock=${v.lock}`.padEnd(13)} ${v.how}`,
    ),
    ...PAY_VARIANTS.map(
      (v, i) => `${i === 0 ? 'pay:  ' : '      '} ${`?lock=${v.lock}`.padEnd(13)} ${v.how}`,
    ),
  ];
}

/** One sentence per scenario; `ok` is false when a locked variant misbehaved (a library bug). */
export function sharedVerdicts(
  reads: readonly ReadsResult[],
  payments: readonly PaymentsResult[],
): { text: string; ok: boolean; good: boolean }[] {
  const out: { text: string; ok: boolean; good: boolean }[] = [];
  const by = <T extends { lock: string }>(rows: readonly T[], lock: string) =>
    rows.find((r) => r.lock === lock);
  const shared = by(reads, 'read');
  const exclusive = by(reads, 'write');
  const unlocked = by(reads, 'none');
  const failedTail = (n: number) => (n ? `; ${n} requests failed` : '');
  if (shared) {
    const vs =
      exclusive && exclusive.readsPerSecond > 0
        ? `, ${(shared.readsPerSecond / exclusive.readsPerSecond).toFixed(1)}x the exclusive lock's ${int(exclusive.readsPerSecond)}/s`
        : '';
    out.push({
      text: `reads: read locks served ${int(shared.readsPerSecond)} reads/s${vs}; ${shared.torn} torn reads${failedTail(shared.failed)}.`,
      ok: shared.torn === 0 && (exclusive?.torn ?? 0) === 0,
      good: shared.torn === 0,
    });
  }
  if (unlocked) {
    out.push({
      text:
        unlocked.torn > 0
          ? `reads without locks: ${unlocked.torn} of ${unlocked.reads} saw a stock and a price from different restocks (half a restock).`
          : `reads without locks: no torn read this time (the race is timing-dependent).`,
      ok: true,
      good: unlocked.torn === 0,
    });
  }
  const permits = by(payments, 'permits');
  const none = by(payments, 'none');
  if (permits) {
    out.push({
      text: `payments: permits: 3 kept the gateway at ${permits.maxInFlight} calls at once; ${permits.refused} refused, ${permits.paid} of ${permits.payments} paid${failedTail(permits.failed)}.`,
      ok: permits.refused === 0 && permits.maxInFlight <= 3,
      good: permits.refused === 0 && permits.failed === 0,
    });
  }
  if (none) {
    out.push({
      text: `payments without a guard: up to ${none.maxInFlight} calls at once; the gateway refused ${none.refused} of ${none.payments} (503).`,
      ok: true,
      good: none.refused === 0,
    });
  }
  return out;
}
