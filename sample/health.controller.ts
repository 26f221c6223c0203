import { Controller, Get, Inject } from '@nestjs/common';
import { SAMPLE_CONFIG, type SampleConfig } from './config/sample.config';

@Controller('health')
export class HealthController {
  constructor(@Inject(SAMPLE_CONFIG) private readonly config: SampleConfig) {}

  @Get()
  check(): { status: 'ok'; instance: string; pid: number } {
    return { status: 'ok', instance: this.config.instance, pid: process.pid };
  }
}
