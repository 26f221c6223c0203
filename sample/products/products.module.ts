import { Module } from '@nestjs/common';
import { ChaosHook } from './chaos-hook';
import { PriceAndStock } from './price-and-stock';
import { ProductsController } from './products.controller';
import { ProductsRepository } from './products.repository';
import { PurchaseService } from './purchase.service';
import { SegmentedPurchase } from './segmented-purchase';

@Module({
  controllers: [ProductsController],
  providers: [ProductsRepository, PurchaseService, SegmentedPurchase, PriceAndStock, ChaosHook],
  exports: [ProductsRepository],
})
export class ProductsModule {}
