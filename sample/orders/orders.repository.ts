import { Injectable } from '@nestjs/common';
import type { Statement } from 'better-sqlite3';
import { DatabaseService } from '../database/database.service';

/** `null`: not paid; `paying`: a payment is at the gateway; `paid`. */
export type PaymentState = 'paying' | 'paid' | null;

export interface Order {
  readonly id: number;
  readonly productId: number;
  readonly quantity: number;
  /** quantity x the product's price now, in cents. */
  readonly amount: number;
  readonly paymentState: PaymentState;
  readonly paymentId: string | null;
  readonly paidAt: number | null;
}

/**
 * Orders (written by purchases) and their payment in the shared SQLite file. `claim` is the
 * guard against paying an order twice: one statement that only one caller of any instance wins.
 */
@Injectable()
export class OrdersRepository {
  private readonly byId: Statement<[number], Order>;
  private readonly claimPayment: Statement<[number]>;
  private readonly releaseClaim: Statement<[number]>;
  private readonly markPaid: Statement<[string, number, number]>;

  constructor(database: DatabaseService) {
    const { db } = database;
    this.byId = db.prepare(
      `SELECT o.id, o.product_id AS productId, o.quantity, o.quantity * p.price AS amount,
              o.payment_state AS paymentState, o.payment_id AS paymentId, o.paid_at AS paidAt
         FROM orders o JOIN products p ON p.id = o.product_id
        WHERE o.id = ?`,
    );
    this.claimPayment = db.prepare(
      `UPDATE orders SET payment_state = 'paying' WHERE id = ? AND payment_state IS NULL`,
    );
    this.releaseClaim = db.prepare(
      `UPDATE orders SET payment_state = NULL WHERE id = ? AND payment_state = 'paying'`,
    );
    this.markPaid = db.prepare(
      `UPDATE orders SET payment_state = 'paid', payment_id = ?, paid_at = ? WHERE id = ?`,
    );
  }

  find(id: number): Order | undefined {
    return this.byId.get(id);
  }

  /** Marks the order as being paid; `false` if it is paid or being paid already. */
  claim(id: number): boolean {
    return this.claimPayment.run(id).changes === 1;
  }

  /** The payment failed: the order can be paid again. */
  unclaim(id: number): void {
    this.releaseClaim.run(id);
  }

  paid(id: number, paymentId: string): void {
    this.markPaid.run(paymentId, Date.now(), id);
  }
}
