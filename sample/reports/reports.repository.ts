import { Injectable } from '@nestjs/common';
import type { Statement } from 'better-sqlite3';
import { DatabaseService } from '../database/database.service';

export interface Report {
  readonly id: string;
  readonly fence: number;
  readonly instance: string;
  readonly progress: number;
  readonly status: string;
  readonly updatedAt: number;
}

export interface ReportRun {
  readonly reportId: string;
  readonly fence: number;
  readonly instance: string;
  readonly startedAt: number;
  readonly finishedAt: number;
  readonly lost: boolean;
}

@Injectable()
export class ReportsRepository {
  private readonly fencedWrite: Statement<[string, number, string, number, string, number]>;
  private readonly byId: Statement<[string], Report>;
  private readonly insertRun: Statement<[string, number, string, number, number, number]>;

  constructor(database: DatabaseService) {
    const { db } = database;
    // A fenced write (Kleppmann): it lands only if no holder with a newer token wrote first, so
    // a holder that lost its lock without noticing cannot overwrite its successor's work.
    this.fencedWrite = db.prepare(
      `INSERT INTO reports (id, fence, instance, progress, status, updated_at)
       VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET fence = excluded.fence, instance = excluded.instance,
         progress = excluded.progress, status = excluded.status, updated_at = excluded.updated_at
       WHERE excluded.fence >= reports.fence`,
    );
    this.byId = db.prepare(
      `SELECT id, fence, instance, progress, status, updated_at AS updatedAt
         FROM reports WHERE id = ?`,
    );
    this.insertRun = db.prepare(
      `INSERT INTO report_runs (report_id, fence, instance, started_at, finished_at, lost)
       VALUES (?, ?, ?, ?, ?, ?)`,
    );
  }

  /** Writes the report's state under `fence`; `false` if a newer fence already wrote it. */
  save(id: string, fence: number, instance: string, progress: number, status: string): boolean {
    return this.fencedWrite.run(id, fence, instance, progress, status, Date.now()).changes > 0;
  }

  find(id: string): Report | undefined {
    return this.byId.get(id);
  }

  /** One row per finished build, so overlaps between instances can be checked afterwards. */
  recordRun(run: ReportRun): void {
    this.insertRun.run(
      run.reportId,
      run.fence,
      run.instance,
      run.startedAt,
      run.finishedAt,
      run.lost ? 1 : 0,
    );
  }
}
