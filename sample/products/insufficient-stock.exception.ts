import { ConflictException } from '@nestjs/common';

/** 409 for a sale the stock cannot cover; the body says how much is left. */
export class InsufficientStockException extends ConflictException {
  constructor(productId: number, remaining: number, requested: number) {
    super({
      statusCode: 409,
      error: 'Conflict',
      code: 'INSUFFICIENT_STOCK',
      message: `insufficient stock: product ${productId} has ${remaining} left, ${requested} requested`,
      productId,
      remaining,
      requested,
    });
  }
}
