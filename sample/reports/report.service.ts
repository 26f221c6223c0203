import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable } from '@nestjs/common';
import { LockContext, Locked } from 'nest-locked';
import { SAMPLE_CONFIG, type SampleConfig } from '../config/sample.config';
import { ReportsRepository } from './reports.repository';

/** The report's lease: deliberately shorter than a build, so only the watchdog keeps it. */
export const REPORT_LEASE_MS = 1_000;
const STEP_MS = 100;

export interface ReportResult {
  readonly id: string;
  /** Fencing token of the lock the build held; every write of the report carried it. */
  readonly fence: number;
  readonly instance: string;
  /** The lease (ttl) of the lock, in ms. */
  readonly ttl: number;
  /** How long the lock was held when the build ended, in ms. */
  readonly heldMs: number;
  /** `heldMs > ttl`: the watchdog renewed the lease while the build ran. */
  readonly outlivedLease: boolean;
  /** The lock was lost while building (the signal aborted); the build stopped early. */
  readonly lost: boolean;
  /** A write was refused because a newer fence had written the report. */
  readonly fencedOut: boolean;
  readonly status: 'done' | 'abandoned';
  readonly progress: number;
  readonly startedAt: number;
  readonly finishedAt: number;
}

@Injectable()
export class ReportService {
  constructor(
    private readonly reports: ReportsRepository,
    @Inject(SAMPLE_CONFIG) private readonly config: SampleConfig,
  ) {}

  /**
   * A long job on one report at a time, cluster-wide. The lease is 1 s and a build takes longer:
   * the watchdog renews the lease every ttl/3 while the build runs. A second build of the same
   * report does not wait (`waitTimeout: 0`): it is refused with 409 and `Retry-After`.
   *
   * Each step checks the lock's signal and writes with the fence, the two ways code learns it
   * no longer holds the lock.
   */
  @Locked('report:{id}', { ttl: REPORT_LEASE_MS, waitTimeout: 0 })
  async build(id: string, durationMs: number): Promise<ReportResult> {
    const { fence, signal, acquiredAt } = LockContext.current()!;
    const { instance } = this.config;
    const startedAt = Date.now();
    let progress = 0;
    let fencedOut = !this.reports.save(id, fence, instance, progress, 'running');
    while (!fencedOut && !signal.aborted) {
      const elapsed = Date.now() - startedAt;
      if (elapsed >= durationMs) {
        // Done: the last step may have been measured a millisecond short of the end (99).
        progress = 100;
        break;
      }
      await sleep(Math.min(STEP_MS, durationMs - elapsed));
      progress = Math.min(100, Math.floor(((Date.now() - startedAt) / durationMs) * 100));
      if (signal.aborted) break;
      fencedOut = !this.reports.save(id, fence, instance, progress, 'running');
    }
    const status = signal.aborted || fencedOut ? 'abandoned' : 'done';
    if (!fencedOut) fencedOut = !this.reports.save(id, fence, instance, progress, status);
    const finishedAt = Date.now();
    this.reports.recordRun({
      reportId: id,
      fence,
      instance,
      startedAt,
      finishedAt,
      lost: signal.aborted,
    });
    const heldMs = finishedAt - acquiredAt;
    return {
      id,
      fence,
      instance,
      ttl: REPORT_LEASE_MS,
      heldMs,
      outlivedLease: heldMs > REPORT_LEASE_MS,
      lost: signal.aborted,
      fencedOut,
      status,
      progress,
      startedAt,
      finishedAt,
    };
  }
}
