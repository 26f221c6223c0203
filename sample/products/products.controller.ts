import {
  BadRequestException,
  Body,
  Controller,
  Get,
  NotFoundException,
  Param,
  ParseIntPipe,
  Post,
  Query,
  Res,
} from '@nestjs/common';
import { bodyObject, intField, nameField } from '../common/validation';
import { type Product, type ProductView, ProductsRepository } from './products.repository';
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
  ) {}

  /**
   * `{ name?, stock }` creates a product (201); `{ id, stock }` sets the stock of an existing one
   * (restock, 200). Either way the stock is split into slices for mode=segmented.
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
    return this.products.create(nameField(body.name, 'name', 'product'), stock);
  }

  @Get(':id')
  get(@Param('id', ParseIntPipe) id: number): ProductView {
    const product = this.products.view(id);
    if (!product) throw new NotFoundException(`product ${id} does not exist`);
    return product;
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
    return this.purchases.purchase(parseMode(mode), id, quantity);
  }
}

function parseMode(mode: string | undefined): PurchaseMode {
  if (mode === undefined || mode === '') return 'product';
  if (!(PURCHASE_MODES as readonly string[]).includes(mode)) {
    throw new BadRequestException(
      `mode must be one of ${PURCHASE_MODES.join(', ')}, got "${mode}".`,
    );
  }
  return mode as PurchaseMode;
}
