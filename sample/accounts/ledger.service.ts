import { Injectable, NotFoundException } from '@nestjs/common';
import { Locked } from 'nest-locked';
import { AccountsRepository } from './accounts.repository';

/** What closing a day returns: the balances it audited. */
export interface LedgerClose {
  readonly day: string;
  readonly audited: Readonly<Record<string, number>>;
  readonly entries: number;
}

/** The day a transfer is booked on (UTC). */
export const today = (): string => new Date().toISOString().slice(0, 10);

/**
 * The day's ledger: transfers post to it, a close audits every account. Its two lock orders are
 * the sample's lock-order inversion when `SAMPLE_LOCK_INVERSION=on` makes transfers post here
 * while they hold the accounts: `close` holds `ledger:{day}` and takes `account:{id}`, the
 * reverse. Nothing deadlocks in the demo (it runs them one after the other); lock-order checking
 * reports the cycle the first time both orders are seen, on whichever instance.
 */
@Injectable()
export class LedgerService {
  /** Entries posted by this instance, per day (the demo only counts them). */
  private readonly entries = new Map<string, number>();

  constructor(private readonly accounts: AccountsRepository) {}

  @Locked('ledger:{day}')
  async post(day: string, from: string, to: string, amount: number): Promise<void> {
    void from;
    void to;
    void amount;
    this.entries.set(day, (this.entries.get(day) ?? 0) + 1);
  }

  @Locked('ledger:{day}')
  async close(day: string, ids: readonly string[]): Promise<LedgerClose> {
    const audited: Record<string, number> = {};
    for (const id of ids) audited[id] = await this.audit(id);
    return { day, audited, entries: this.entries.get(day) ?? 0 };
  }

  @Locked('account:{id}')
  async audit(id: string): Promise<number> {
    const account = this.accounts.find(id);
    if (!account) throw new NotFoundException(`account ${id} does not exist`);
    return account.balance;
  }
}
