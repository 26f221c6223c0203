import { Injectable } from '@nestjs/common';
import type { Statement } from 'better-sqlite3';
import { DatabaseService } from '../database/database.service';

export interface Account {
  readonly id: string;
  readonly balance: number;
}

/** Accounts and the transfer log in the shared SQLite file. */
@Injectable()
export class AccountsRepository {
  private readonly byId: Statement<[string], Account>;
  private readonly upsert: Statement<[string, number, number]>;
  private readonly setBalance: Statement<[number, number, string]>;
  private readonly log: Statement<[string, string, number, string, number]>;
  private readonly writeTx: (from: Account, to: Account, amount: number, instance: string) => void;

  constructor(database: DatabaseService) {
    const { db } = database;
    this.byId = db.prepare('SELECT id, balance FROM accounts WHERE id = ?');
    this.upsert = db.prepare(
      `INSERT INTO accounts (id, balance, updated_at) VALUES (?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET balance = excluded.balance, updated_at = excluded.updated_at`,
    );
    this.setBalance = db.prepare('UPDATE accounts SET balance = ?, updated_at = ? WHERE id = ?');
    this.log = db.prepare(
      `INSERT INTO transfers (from_id, to_id, amount, instance, created_at)
       VALUES (?, ?, ?, ?, ?)`,
    );
    // Absolute writes of balances computed from an earlier read: atomic as a pair, but only
    // correct if nobody changed either account in between. That is what the lock is for.
    this.writeTx = db.transaction(
      (from: Account, to: Account, amount: number, instance: string) => {
        const now = Date.now();
        this.setBalance.run(from.balance - amount, now, from.id);
        this.setBalance.run(to.balance + amount, now, to.id);
        this.log.run(from.id, to.id, amount, instance, now);
      },
    );
  }

  find(id: string): Account | undefined {
    return this.byId.get(id);
  }

  /** Creates the account or sets its balance. */
  save(id: string, balance: number): Account {
    this.upsert.run(id, balance, Date.now());
    return this.find(id)!;
  }

  /** Writes both balances as read in `from`/`to`, moved by `amount`, in one transaction. */
  move(from: Account, to: Account, amount: number, instance: string): void {
    this.writeTx(from, to, amount, instance);
  }
}
