import {
  BadRequestException,
  Body,
  Controller,
  Get,
  HttpCode,
  NotFoundException,
  Param,
  Post,
} from '@nestjs/common';
import { bodyObject, idField, intField } from '../common/validation';
import { type Account, AccountsRepository } from './accounts.repository';
import { type LedgerClose, LedgerService } from './ledger.service';
import { type TransferResult, TransferService } from './transfer.service';

const MAX = Number.MAX_SAFE_INTEGER;

@Controller('accounts')
export class AccountsController {
  constructor(
    private readonly accounts: AccountsRepository,
    private readonly transfers: TransferService,
    private readonly ledger: LedgerService,
  ) {}

  /** `{ id, balance }`: creates the account or sets its balance. */
  @Post()
  save(@Body() raw: unknown): Account {
    const body = bodyObject(raw);
    return this.accounts.save(
      idField(body.id, 'id'),
      intField(body.balance, 'balance', { min: 0, max: MAX }),
    );
  }

  /** `{ from, to, amount }`. */
  @Post('transfer')
  @HttpCode(200)
  transfer(@Body() raw: unknown): Promise<TransferResult> {
    const body = bodyObject(raw);
    const from = idField(body.from, 'from');
    const to = idField(body.to, 'to');
    if (from === to) throw new BadRequestException('from and to must be different accounts.');
    return this.transfers.transfer(from, to, intField(body.amount, 'amount', { min: 1, max: MAX }));
  }

  /** `{ day, accounts }`: closes the day's ledger, auditing each account under its lock. */
  @Post('ledger/close')
  @HttpCode(200)
  closeLedger(@Body() raw: unknown): Promise<LedgerClose> {
    const body = bodyObject(raw);
    const ids = Array.isArray(body.accounts) ? body.accounts : [];
    return this.ledger.close(
      idField(body.day, 'day'),
      ids.map((id, i) => idField(id, `accounts[${i}]`)),
    );
  }

  @Get(':id')
  get(@Param('id') id: string): Account {
    const account = this.accounts.find(idField(id, 'id'));
    if (!account) throw new NotFoundException(`account ${id} does not exist`);
    return account;
  }
}
