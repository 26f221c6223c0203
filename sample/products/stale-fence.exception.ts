import { ConflictException } from '@nestjs/common';

/**
 * 409 for a sale whose fenced write the database refused: this buyer's lock was taken over
 * (its lease ran out, or Redis forgot it) before the sale was written, and a newer holder wrote
 * the stock since. Nothing was sold; buying again is safe.
 */
export class StaleFenceException extends ConflictException {
  constructor(productId: number, fence: number) {
    super({
      statusCode: 409,
      error: 'Conflict',
      code: 'STALE_FENCE',
      message:
        `the lock on product ${productId} was lost before this sale was written: a newer ` +
        `holder wrote the stock after fence ${fence}; nothing was sold, buy again`,
      productId,
      fence,
    });
  }
}
