import { Module } from '@nestjs/common';
import { ProductsController } from './products.controller';
import { ProductsRepository } from './products.repository';
import { PurchaseService } from './purchase.service';
import { SegmentedPurchase } from './segmented-purchase';

@Module({
  controllers: [ProductsController],
  providers: [ProductsRepository, PurchaseService, SegmentedPurchase],
  exports: [ProductsRepository],
})
export class ProductsModule {}
