import {
  Body,
  Controller,
  Get,
  HttpCode,
  NotFoundException,
  Param,
  ParseIntPipe,
  Post,
  Query,
  Res,
} from '@nestjs/common';
import { bodyObject, intField, nameField, oneOf } from '../common/validation';
import {
  type ProductView,
  PriceAndStock,
  READ_LOCKS,
  RESTOCK_LOCKS,
  type RestockLock,
  type RestockResult,
} from './price-and-stock';
import { type Product, ProductsRepository } from './products.repository';
import {
  PURCHASE_MODES,
  type PurchaseMode,
  type PurchaseResult,
  PurchaseService,
} from './purchase.service';
import { SegmentedPurchase } from './segmented-purchase';

const MAX = Number.MAX_SAFE_INTEGER;

/** The part of the platform's response object used here (no @types/express needed). */
interface StatusSetter {
  status(code: number): unknown;
}

@Controller('products')
export class ProductsController {
  constructor(
    private readonly products: ProductsRepository,
    private readonly purchases: PurchaseService,
    private readonly segmented: SegmentedPurchase,
    private readonly priceAndStock: PriceAndStock,
  ) {}

  /**
   * `{ name?, stock, price? }` creates a product (201); `{ id, stock }` sets the stock of an
   * existing one (200, no lock, for resetting a sale). Either way the stock is split into slices
   * for mode=segmented.
   */
  @Post()
  create(@Body() raw: unknown, @Res({ passthrough: true }) res: StatusSetter): Product {
    const body = bodyObject(raw);
    const stock = intField(body.stock, 'stock', { min: 0, max: MAX });
    if (body.id !== undefined) {
      const id = intField(body.id, 'id', { min: 1, max: MAX });
      const product = this.products.restock(id, stock);
      if (!product) throw new NotFoundException(`product ${id} does not exist`);
      this.segmented.restocked(id);
      res.status(200);
      return product;
    }
    const price = intField(body.price, 'price', { min: 0, max: MAX, fallback: 100 });
    return this.products.create(nameField(body.name, 'name', 'product'), stock, price);
  }

  /** Price and stock as one pair; `?lock=read|write|none` (default `read`, a shared lock). */
  @Get(':id')
  get(
    @Param('id', ParseIntPipe) id: number,
    @Query('lock') lock: string | undefined,
  ): Promise<ProductView> {
    return this.priceAndStock.read(oneOf(lock, 'lock', READ_LOCKS, 'read'), id);
  }

  /** `{ stock, price }`, written in two steps; `?lock=write|none` (default `write`). */
  @Post(':id/restock')
  @HttpCode(200)
  restock(
    @Param('id', ParseIntPipe) id: number,
    @Query('lock') lock: string | undefined,
    @Body() raw: unknown,
  ): Promise<RestockResult> {
    const body = bodyObject(raw);
    const stock = intField(body.stock, 'stock', { min: 0, max: MAX });
    const price = intField(body.price, 'price', { min: 0, max: MAX });
    const mode: RestockLock = oneOf(lock, 'lock', RESTOCK_LOCKS, 'write');
    return this.priceAndStock.restock(mode, id, stock, price);
  }

  /** `?mode=none|product|segmented` (default `product`), body `{ quantity }` (default 1). */
  @Post(':id/purchase')
  purchase(
    @Param('id', ParseIntPipe) id: number,
    @Query('mode') mode: string | undefined,
    @Body() raw: unknown,
  ): Promise<PurchaseResult> {
    const body = bodyObject(raw);
    const quantity = intField(body.quantity, 'quantity', { min: 1, max: 1_000_000, fallback: 1 });
    const purchaseMode: PurchaseMode = oneOf(mode, 'mode', PURCHASE_MODES, 'product');
    return this.purchases.purchase(purchaseMode, id, quantity);
  }
}
