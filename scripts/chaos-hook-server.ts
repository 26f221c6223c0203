import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { LostPoint, PurchasePointReport } from '../sample/products/chaos-hook';

/**
 * The chaos demo's end of the sample's chaos hook (`sample/products/chaos-hook.ts`): a loopback
 * HTTP server the instances POST to. A purchase at a point waits for `answer()`, so the demo can
 * stop or kill its process meanwhile, or hold it; lost locks are recorded as they come.
 */

/** A purchase at one of its points, waiting for the demo's go-ahead. */
export interface PendingPurchase extends PurchasePointReport {
  /** Lets the purchase go on (a no-op once answered, or if its process died). */
  answer(): void;
}

export class ChaosHookServer {
  /** Every lost lock reported so far, in arrival order. */
  readonly lost: LostPoint[] = [];
  private onPurchase: (purchase: PendingPurchase) => void = (p) => p.answer();
  private readonly lostWaiters = new Set<() => void>();

  private constructor(private readonly server: http.Server) {
    server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => this.receive(req.url ?? '', Buffer.concat(chunks).toString(), res));
    });
  }

  static async start(): Promise<ChaosHookServer> {
    const hook = new ChaosHookServer(http.createServer());
    await new Promise<void>((resolve, reject) => {
      hook.server.once('error', reject);
      hook.server.listen(0, '127.0.0.1', resolve);
    });
    return hook;
  }

  /** `http://127.0.0.1:<port>`, for `SAMPLE_CHAOS_URL`. */
  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Who decides about each purchase point from now on (by default: answered at once). */
  handlePurchases(onPurchase: (purchase: PendingPurchase) => void): void {
    this.onPurchase = onPurchase;
  }

  /** Resolves when a lost lock matching `where` is (or was) reported; `undefined` after `ms`. */
  async lostWhere(where: (l: LostPoint) => boolean, ms: number): Promise<LostPoint | undefined> {
    const deadline = Date.now() + ms;
    for (;;) {
      const found = this.lost.find(where);
      if (found) return found;
      const left = deadline - Date.now();
      if (left <= 0) return undefined;
      await new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          this.lostWaiters.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, left);
        this.lostWaiters.add(wake);
      });
    }
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private receive(path: string, body: string, res: http.ServerResponse): void {
    let point: unknown;
    try {
      point = JSON.parse(body);
    } catch {
      res.writeHead(400).end();
      return;
    }
    if (path === '/lost') {
      this.lost.push(point as LostPoint);
      for (const wake of [...this.lostWaiters]) wake();
      res.writeHead(204).end();
      return;
    }
    if (path !== '/purchase') {
      res.writeHead(404).end();
      return;
    }
    let answered = false;
    this.onPurchase({
      ...(point as PurchasePointReport),
      answer: () => {
        if (answered) return;
        answered = true;
        // The reader may have been killed meanwhile: its socket is gone, nothing to answer.
        if (!res.destroyed) res.writeHead(204).end();
      },
    });
  }
}
