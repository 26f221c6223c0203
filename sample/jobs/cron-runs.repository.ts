import { Injectable } from '@nestjs/common';
import type { Statement } from 'better-sqlite3';
import { DatabaseService } from '../database/database.service';

export interface CronRun {
  readonly job: string;
  readonly tick: number;
  readonly instance: string;
  readonly fence: number;
  readonly orders: number;
  readonly startedAt: number;
  readonly finishedAt: number;
}

@Injectable()
export class CronRunsRepository {
  private readonly last: Statement<[string], { tick: number | null }>;
  private readonly orderCount: Statement<[], { n: number }>;
  private readonly insert: Statement<[string, number, string, number, number, number, number]>;

  constructor(database: DatabaseService) {
    const { db } = database;
    this.last = db.prepare('SELECT MAX(tick) AS tick FROM cron_runs WHERE job = ?');
    this.orderCount = db.prepare('SELECT COUNT(*) AS n FROM orders');
    this.insert = db.prepare(
      `INSERT INTO cron_runs (job, tick, instance, fence, orders, started_at, finished_at)
       VALUES (?, ?, ?, ?, ?, ?, ?)`,
    );
  }

  /** The latest tick `job` ran for, on any instance. */
  lastTick(job: string): number | undefined {
    return this.last.get(job)?.tick ?? undefined;
  }

  /** The job's work: a snapshot of how many orders the shop has taken so far. */
  countOrders(): number {
    return this.orderCount.get()!.n;
  }

  record(run: CronRun): void {
    this.insert.run(
      run.job,
      run.tick,
      run.instance,
      run.fence,
      run.orders,
      run.startedAt,
      run.finishedAt,
    );
  }
}
