import { Inject, Injectable, NotFoundException } from '@nestjs/common';
import { LockContext, Locked } from 'nest-locked';
import { SAMPLE_CONFIG, type SampleConfig } from '../config/sample.config';
import { OrdersRepository } from './orders.repository';
import { GatewayBusyException, OrderAlreadyPaidException } from './payment.exceptions';
import { type Charge, GatewayRefusedError, PaymentGateway } from './payment-gateway';

/** Calls to the gateway at once across all instances: the gateway's own limit. */
export const GATEWAY_PERMITS = 3;

/** `?lock=permits` (default): at most `GATEWAY_PERMITS` calls at once; `none`: no guard. */
export const PAY_LOCKS = ['permits', 'none'] as const;
export type PayLock = (typeof PAY_LOCKS)[number];

export interface PaymentResult {
  readonly orderId: number;
  readonly paymentId: string;
  readonly amount: number;
  readonly lock: PayLock;
  readonly instance: string;
  /** Calls in progress at the gateway when this one arrived, itself included. */
  readonly inFlight: number;
  /** The permit's fence and the key's number of permits (lock=permits only). */
  readonly fence?: number;
  readonly permits?: number;
}

/** A charge, with the permit it was made under (lock=permits only). */
type PermitCharge = Charge & { readonly fence?: number; readonly permits?: number };

/**
 * Pays orders through a gateway that refuses more than 3 calls at once. `permits: 3` makes the
 * lock a semaphore: up to three holders of `gateway:payments` at once across every instance, the
 * others wait their turn (FIFO) instead of being refused.
 */
@Injectable()
export class PaymentService {
  constructor(
    private readonly orders: OrdersRepository,
    private readonly gateway: PaymentGateway,
    @Inject(SAMPLE_CONFIG) private readonly config: SampleConfig,
  ) {}

  /**
   * @throws NotFoundException no such order
   * @throws OrderAlreadyPaidException 409, paid or being paid
   * @throws GatewayBusyException 503, the gateway refused the call (the order stays unpaid)
   * @throws LockNotAcquiredError no permit came free within the wait (409 + Retry-After)
   */
  async pay(lock: PayLock, orderId: number): Promise<PaymentResult> {
    const order = this.orders.find(orderId);
    if (!order) throw new NotFoundException(`order ${orderId} does not exist`);
    // One payment per order, whichever instance gets the request: a guard in the database, so
    // the permit below is only about the gateway.
    if (!this.orders.claim(orderId)) {
      throw new OrderAlreadyPaidException(orderId, this.orders.find(orderId)?.paymentState ?? null);
    }
    let charge: PermitCharge;
    try {
      charge =
        lock === 'permits'
          ? await this.chargeWithPermit(order.amount)
          : await this.gateway.charge(order.amount);
    } catch (err) {
      this.orders.unclaim(orderId);
      if (err instanceof GatewayRefusedError) {
        throw new GatewayBusyException(orderId, err.inFlight, err.limit);
      }
      throw err;
    }
    this.orders.paid(orderId, charge.paymentId);
    return { orderId, lock, instance: this.config.instance, ...charge };
  }

  /** lock=permits: one of the `GATEWAY_PERMITS` permits of the gateway, held for the call. */
  @Locked('gateway:payments', { permits: GATEWAY_PERMITS })
  async chargeWithPermit(amount: number): Promise<PermitCharge> {
    const { fence, permits } = LockContext.current()!;
    const charge = await this.gateway.charge(amount);
    return { ...charge, fence, permits };
  }
}
