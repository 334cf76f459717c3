import { Body, Controller, Get, HttpCode, Post, UseGuards } from '@nestjs/common';
import { ClusterAuthGuard, parseWith } from '@tessera/platform';
import {
  type DecisionAnswer,
  type ResolveOutcome,
  type ShardTransactions,
  type TransactionDecision,
  abortTransactionSchema,
  commitTransactionSchema,
  coordinateCommitSchema,
  decisionQuerySchema,
  prepareTransactionSchema,
  reserveCommitTimeSchema,
  resolveTransactionSchema,
} from '@tessera/protocol';
import type { ClusterTimestamp } from '@tessera/core';
import { TransactionCoordinator } from './transaction-coordinator.service.js';
import { TransactionParticipants } from './transaction-participants.service.js';
import { TransactionResolver } from './transaction-resolver.js';

/** The participant's and the coordinator's commands, from routers and from other shards. */
@Controller('internal/transactions')
@UseGuards(ClusterAuthGuard)
export class TransactionsController {
  constructor(
    private readonly participants: TransactionParticipants,
    private readonly coordinator: TransactionCoordinator,
    private readonly resolver: TransactionResolver,
  ) {}

  @Get()
  async list(): Promise<ShardTransactions> {
    return { participants: this.participants.describe(), coordinating: await this.coordinator.describe() };
  }

  @Post('reserveCommitTime')
  @HttpCode(200)
  reserveCommitTime(@Body() body: unknown): Promise<{ reservedTime: ClusterTimestamp }> {
    return this.participants.reserveCommitTime(parseWith(reserveCommitTimeSchema, body, 'reserveCommitTime command'));
  }

  @Post('prepare')
  @HttpCode(200)
  prepare(@Body() body: unknown): Promise<{ prepared: true }> {
    return this.participants.prepare(parseWith(prepareTransactionSchema, body, 'prepareTransaction command'));
  }

  @Post('commit')
  @HttpCode(200)
  commit(@Body() body: unknown): Promise<{ committed: true }> {
    return this.participants.commit(parseWith(commitTransactionSchema, body, 'commitTransaction command'));
  }

  @Post('abort')
  @HttpCode(200)
  abort(@Body() body: unknown): Promise<{ aborted: true }> {
    return this.participants.abort(parseWith(abortTransactionSchema, body, 'abortTransaction command'));
  }

  @Post('resolve')
  @HttpCode(200)
  resolve(@Body() body: unknown): Promise<ResolveOutcome> {
    return this.resolver.resolveNow(parseWith(resolveTransactionSchema, body, 'resolveTransaction command'));
  }

  @Post('coordinateCommit')
  @HttpCode(200)
  coordinateCommit(@Body() body: unknown): Promise<TransactionDecision> {
    return this.coordinator.coordinateCommit(parseWith(coordinateCommitSchema, body, 'coordinateCommitTransaction command'));
  }

  @Post('decision')
  @HttpCode(200)
  decision(@Body() body: unknown): Promise<DecisionAnswer> {
    return this.coordinator.decision(parseWith(decisionQuerySchema, body, 'transaction decision query'));
  }
}
