import { Module } from '@nestjs/common';
import { ReportService } from './report.service';
import { ReportsController } from './reports.controller';
import { ReportsRepository } from './reports.repository';

@Module({
  controllers: [ReportsController],
  providers: [ReportsRepository, ReportService],
})
export class ReportsModule {}
