import { Body, Controller, Get, HttpCode, NotFoundException, Param, Post } from '@nestjs/common';
import { bodyObject, idField, intField } from '../common/validation';
import { type ReportResult, ReportService } from './report.service';
import { type Report, ReportsRepository } from './reports.repository';

@Controller('reports')
export class ReportsController {
  constructor(
    private readonly builder: ReportService,
    private readonly reports: ReportsRepository,
  ) {}

  /** Builds report `:id`; body `{ durationMs }` (default 3000, longer than the 1 s lease). */
  @Post(':id')
  @HttpCode(200)
  build(@Param('id') id: string, @Body() raw: unknown): Promise<ReportResult> {
    const body = bodyObject(raw);
    const durationMs = intField(body.durationMs, 'durationMs', {
      min: 1,
      max: 60_000,
      fallback: 3_000,
    });
    return this.builder.build(idField(id, 'id'), durationMs);
  }

  @Get(':id')
  get(@Param('id') id: string): Report {
    const report = this.reports.find(idField(id, 'id'));
    if (!report) throw new NotFoundException(`report ${id} does not exist`);
    return report;
  }
}
