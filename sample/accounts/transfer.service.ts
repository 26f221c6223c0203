import { BadRequestException, Inject, Injectable, NotFoundException } from '@nestjs/common';
import { LockContext, Locked } from 'nest-locked';
import { SAMPLE_CONFIG, type SampleConfig } from '../config/sample.config';
import { DatabaseService } from '../database/database.service';
import { type Account, AccountsRepository } from './accounts.repository';
import { InsufficientFundsException } from './insufficient-funds.exception';
import { LedgerService, today } from './ledger.service';

export interface TransferResult {
  readonly from: Account;
  readonly to: Account;
  readonly amount: number;
  readonly instance: string;
  /** Fencing token of each account's lock. */
  readonly fences: Readonly<Record<string, number>>;
}

@Injectable()
export class TransferService {
  constructor(
    private readonly accounts: AccountsRepository,
    private readonly database: DatabaseService,
    @Inject(SAMPLE_CONFIG) private readonly config: SampleConfig,
    private readonly ledger: LedgerService,
  ) {}

  /**
   * Moves `amount` from one account to the other. Both accounts are locked, all or nothing, and
   * the library takes the keys in sorted order, so A->B and B->A at the same moment queue behind
   * each other instead of deadlocking.
   *
   * @throws BadRequestException same account on both sides
   * @throws NotFoundException an account does not exist
   * @throws InsufficientFundsException 409 with the balance
   */
  @Locked(['account:{from}', 'account:{to}'])
  async transfer(from: string, to: string, amount: number): Promise<TransferResult> {
    if (from === to) throw new BadRequestException('from and to must be different accounts.');
    const source = this.accounts.find(from);
    if (!source) throw new NotFoundException(`account ${from} does not exist`);
    const target = this.accounts.find(to);
    if (!target) throw new NotFoundException(`account ${to} does not exist`);
    await this.database.roundTrip();
    if (source.balance < amount) {
      throw new InsufficientFundsException(from, source.balance, amount);
    }
    this.accounts.move(source, target, amount, this.config.instance);
    // The inversion the demo shows (SAMPLE_LOCK_INVERSION=on): ledger inside the accounts here,
    // accounts inside the ledger in LedgerService.close.
    if (this.config.lockInversion) await this.ledger.post(today(), from, to, amount);
    return {
      from: this.accounts.find(from)!,
      to: this.accounts.find(to)!,
      amount,
      instance: this.config.instance,
      fences: LockContext.current()!.fences,
    };
  }
}
