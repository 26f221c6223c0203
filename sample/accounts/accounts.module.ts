import { Module } from '@nestjs/common';
import { AccountsController } from './accounts.controller';
import { AccountsRepository } from './accounts.repository';
import { LedgerService } from './ledger.service';
import { TransferService } from './transfer.service';

@Module({
  controllers: [AccountsController],
  providers: [AccountsRepository, TransferService, LedgerService],
})
export class AccountsModule {}
