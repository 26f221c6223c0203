import { Module } from '@nestjs/common';
import { GatewayController } from './gateway.controller';
import { OrdersController } from './orders.controller';
import { OrdersRepository } from './orders.repository';
import { PaymentGateway } from './payment-gateway';
import { PaymentService } from './payment.service';

@Module({
  controllers: [OrdersController, GatewayController],
  providers: [OrdersRepository, PaymentGateway, PaymentService],
})
export class OrdersModule {}
