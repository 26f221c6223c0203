import { ConflictException } from '@nestjs/common';

/** 409 for a transfer the source account cannot cover; the body gives its balance. */
export class InsufficientFundsException extends ConflictException {
  constructor(accountId: string, balance: number, requested: number) {
    super({
      statusCode: 409,
      error: 'Conflict',
      code: 'INSUFFICIENT_FUNDS',
      message: `insufficient funds: account ${accountId} has ${balance}, ${requested} requested`,
      accountId,
      balance,
      requested,
    });
  }
}
