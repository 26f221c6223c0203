import * as http from 'node:http';
import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { LockContext, type LockLostEvent, LockService } from 'nest-locked';
import { SAMPLE_CONFIG, type SampleConfig } from '../config/sample.config';

/**
 * Where a purchase under the product lock is: `holding` (it has the lock, has not read yet) or
 * `stock-read` (it has read the stock and not written yet).
 */
export type PurchasePoint = 'holding' | 'stock-read';

/** What a purchase tells the chaos demo at each point. */
export interface PurchasePointReport {
  readonly point: PurchasePoint;
  readonly productId: number;
  /** At `stock-read`: the stock it read, which its write will be computed from. */
  readonly stock?: number;
  /** The fence of the product lock it holds. */
  readonly fence?: number;
  readonly instance: string;
  readonly pid: number;
}

/** What an instance tells the chaos demo when one of its holders learns it lost its lock. */
export interface LostPoint {
  readonly keys: readonly string[];
  readonly fence: number;
  /** `LockLostError.reason`: `expired` (the lease ran out unrenewed), `lost` (the key was gone). */
  readonly reason: string;
  readonly instance: string;
  readonly pid: number;
  /** `Date.now()` when the holder learned it. */
  readonly at: number;
}

/**
 * The chaos demo's hook into the purchase path (`npm run demo -- --chaos`), on only when
 * `SAMPLE_CHAOS_URL` is set; otherwise every method returns at once and nothing is sent.
 *
 * A fault injected "at some point during the sale" hits whatever the process happens to be
 * doing; the demo wants it at one exact point instead: after a holder of the product lock read
 * the stock and before it writes. So the purchase path waits here for the demo's answer, and the
 * demo stops (SIGSTOP), kills or leaves alone this very process meanwhile. The demo also holds
 * the next holders before they read, so that a late write lands between two sales, not in the
 * middle of one. It also reports every lost lock, to show how soon a holder learns it.
 */
@Injectable()
export class ChaosHook implements OnModuleInit {
  private readonly logger = new Logger(ChaosHook.name);

  constructor(
    @Inject(SAMPLE_CONFIG) private readonly config: SampleConfig,
    private readonly locks: LockService,
  ) {}

  onModuleInit(): void {
    if (!this.config.chaosUrl) return;
    this.locks.on('lost', (event: LockLostEvent) => {
      const lost: LostPoint = {
        keys: event.keys,
        fence: event.fence,
        reason: event.error.reason,
        instance: this.config.instance,
        pid: process.pid,
        at: Date.now(),
      };
      void this.send('/lost', lost);
    });
  }

  /** Called by a locked purchase once it holds the lock, before it reads the stock. */
  holding(productId: number): Promise<void> {
    return this.report('holding', productId);
  }

  /** Called by a locked purchase between reading the stock and writing it. */
  stockRead(productId: number, stock: number): Promise<void> {
    return this.report('stock-read', productId, stock);
  }

  private async report(point: PurchasePoint, productId: number, stock?: number): Promise<void> {
    if (!this.config.chaosUrl) return;
    const report: PurchasePointReport = {
      point,
      productId,
      stock,
      fence: LockContext.current()?.fence,
      instance: this.config.instance,
      pid: process.pid,
    };
    await this.send('/purchase', report);
  }

  /** POSTs `body` and resolves once answered; a demo that is gone is logged, not thrown. */
  private send(path: string, body: object): Promise<void> {
    const payload = Buffer.from(JSON.stringify(body));
    return new Promise<void>((resolve) => {
      const req = http.request(
        `${this.config.chaosUrl}${path}`,
        {
          method: 'POST',
          agent: false,
          headers: { 'content-type': 'application/json', 'content-length': payload.length },
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve());
          res.on('error', () => resolve());
        },
      );
      req.on('error', (err) => {
        this.logger.warn(`chaos hook ${path}: ${err.message}`);
        resolve();
      });
      req.end(payload);
    });
  }
}
