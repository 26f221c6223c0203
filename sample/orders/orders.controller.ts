import {
  Controller,
  Get,
  HttpCode,
  NotFoundException,
  Param,
  ParseIntPipe,
  Post,
  Query,
} from '@nestjs/common';
import { oneOf } from '../common/validation';
import { type Order, OrdersRepository } from './orders.repository';
import { PAY_LOCKS, type PaymentResult, PaymentService } from './payment.service';

@Controller('orders')
export class OrdersController {
  constructor(
    private readonly orders: OrdersRepository,
    private readonly payments: PaymentService,
  ) {}

  @Get(':id')
  get(@Param('id', ParseIntPipe) id: number): Order {
    const order = this.orders.find(id);
    if (!order) throw new NotFoundException(`order ${id} does not exist`);
    return order;
  }

  /** Pays the order at the gateway; `?lock=permits|none` (default `permits`). */
  @Post(':id/pay')
  @HttpCode(200)
  pay(
    @Param('id', ParseIntPipe) id: number,
    @Query('lock') lock: string | undefined,
  ): Promise<PaymentResult> {
    return this.payments.pay(oneOf(lock, 'lock', PAY_LOCKS, 'permits'), id);
  }
}
