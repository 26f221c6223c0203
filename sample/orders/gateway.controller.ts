import { Controller, Get, HttpCode, Post } from '@nestjs/common';
import { type GatewayStats, PaymentGateway } from './payment-gateway';

/** What the simulated gateway saw (it stands in for the provider's own dashboard). */
@Controller('gateway')
export class GatewayController {
  constructor(private readonly gateway: PaymentGateway) {}

  @Get('stats')
  stats(): Promise<GatewayStats> {
    return this.gateway.stats();
  }

  @Post('stats/reset')
  @HttpCode(200)
  reset(): Promise<GatewayStats> {
    return this.gateway.resetStats();
  }
}
