import { Module } from '@nestjs/common';
import { CronRunsRepository } from './cron-runs.repository';
import { TickJob } from './tick.job';

@Module({ providers: [CronRunsRepository, TickJob], exports: [TickJob] })
export class JobsModule {}
