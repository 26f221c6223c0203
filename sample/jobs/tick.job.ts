import { Inject, Injectable, Logger } from '@nestjs/common';
import { Cron, SchedulerRegistry } from '@nestjs/schedule';
import { LockContext, Locked } from 'nest-locked';
import { SAMPLE_CONFIG, type SampleConfig, tickSchedule } from '../config/sample.config';
import { DatabaseService } from '../database/database.service';
import { CronRunsRepository } from './cron-runs.repository';

export const TICK_JOB = 'sales-snapshot';

export type TickOutcome =
  | { readonly ran: true; readonly tick: number; readonly fence: number; readonly orders: number }
  /** Another instance already ran this tick (or a later one). */
  | { readonly ran: false; readonly tick: number; readonly reason: 'done' };

const schedule = tickSchedule();

/**
 * A cron job that runs exactly once per tick across every instance of the app.
 *
 * Every instance's scheduler fires each tick, so two things are needed, and neither is enough
 * alone:
 *
 * 1. A lock on the job, `cron:<job>`, taken with `waitTimeout: 0, onBusy: 'skip'`: instances
 *    that fire while another one runs the tick give up at once (the call resolves with
 *    `undefined`) instead of queueing behind it.
 * 2. A record of the last tick that ran, in the shared database, read and written under that
 *    lock: an instance whose timer fires late (a busy event loop, a GC pause) finds the lock
 *    already free and takes it, but then sees the tick done and skips it. A lock alone would let
 *    it run the tick a second time; a record alone would let two instances race between
 *    reading it and writing it (the read-then-write of the flash sale).
 *
 * A tick is identified by the next scheduled time after it fired, `job.nextDate()`, read
 * synchronously at the top of the handler. It is a pure function of the schedule and the
 * clock, so every instance names a tick the same way, whatever the schedule, even when its
 * timer fires late (by less than one period).
 */
@Injectable()
export class TickJob {
  private readonly logger = new Logger(TickJob.name);

  constructor(
    private readonly runs: CronRunsRepository,
    private readonly database: DatabaseService,
    private readonly scheduler: SchedulerRegistry,
    @Inject(SAMPLE_CONFIG) private readonly config: SampleConfig,
  ) {}

  @Cron(schedule.cronTime, { name: TICK_JOB, disabled: schedule.disabled })
  async onTick(): Promise<void> {
    const tick = this.scheduler.getCronJob(TICK_JOB).nextDate().toMillis();
    try {
      const outcome = await this.runOnce(TICK_JOB, tick);
      if (outcome?.ran) this.logger.debug(`ran tick ${tick} (fence ${outcome.fence})`);
    } catch (err) {
      this.logger.error(`tick ${tick} failed: ${(err as Error).message}`);
    }
  }

  /**
   * Runs `job` for `tick` unless some instance already did. Resolves with `undefined`, without
   * running, while another instance holds the job's lock.
   */
  @Locked('cron:{job}', { waitTimeout: 0, onBusy: 'skip' })
  async runOnce(job: string, tick: number): Promise<TickOutcome | undefined> {
    const last = this.runs.lastTick(job);
    if (last !== undefined && last >= tick) return { ran: false, tick, reason: 'done' };
    const { fence } = LockContext.current()!;
    const startedAt = Date.now();
    const orders = this.runs.countOrders();
    await this.database.roundTrip();
    this.runs.record({
      job,
      tick,
      instance: this.config.instance,
      fence,
      orders,
      startedAt,
      finishedAt: Date.now(),
    });
    return { ran: true, tick, fence, orders };
  }
}
