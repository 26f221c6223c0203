import { ConflictException, ServiceUnavailableException } from '@nestjs/common';

/** 409 for an order that is paid, or being paid by another request. */
export class OrderAlreadyPaidException extends ConflictException {
  constructor(orderId: number, state: string | null) {
    super({
      statusCode: 409,
      error: 'Conflict',
      code: 'ALREADY_PAID',
      message: `order ${orderId} is ${state === 'paid' ? 'paid' : 'being paid'} already`,
      orderId,
    });
  }
}

/** 503: the payment gateway refused the call (too many at once); nothing was charged. */
export class GatewayBusyException extends ServiceUnavailableException {
  constructor(orderId: number, inFlight: number, limit: number) {
    super({
      statusCode: 503,
      error: 'Service Unavailable',
      code: 'PAYMENT_GATEWAY_BUSY',
      message: `the payment gateway refused order ${orderId}: ${inFlight} calls at once, it accepts ${limit}`,
      orderId,
      inFlight,
      limit,
    });
  }
}
