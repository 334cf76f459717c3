import { UseGuards, UseInterceptors } from '@nestjs/common';
import { Args, Field, Float, Mutation, ObjectType, Query, Resolver, Subscription } from '@nestjs/graphql';
import type { ClusterEvent } from '@tessera/protocol';
import { EventBusService } from '../events/event-bus.service.js';
import { ClusterTransactions } from '../transactions/cluster-transactions.service.js';
import { toAsyncIterator } from './async-iterator.js';
import { AuditInterceptor } from './audit.interceptor.js';
import { ControlPlaneGuard } from './control-plane.guard.js';
import { EventType } from './graphql-types.js';

@ObjectType('TransactionParticipant')
export class TransactionParticipantType {
  @Field() shard!: string;
  @Field({ description: 'inProgress, reserved (a commit time held), prepared, or recovered (prepared, found at its start)' })
  state!: string;
}

@ObjectType('Transaction', { description: 'A cross-shard transaction in progress, as its shards report it.' })
export class TransactionType {
  @Field() lsid!: string;
  @Field(() => Float) txnNumber!: number;
  @Field({ description: 'inProgress, preparing, prepared (in doubt until its decision arrives) or committing' }) state!: string;
  @Field(() => String, { nullable: true, description: 'Its first statement on any shard.' }) startedAt!: string | null;
  @Field(() => Float, { nullable: true, description: 'Milliseconds since startedAt.' }) ageMs!: number | null;
  @Field(() => String, { nullable: true, description: 'The shard that coordinates its commit, once known.' }) coordinator!: string | null;
  @Field(() => [TransactionParticipantType]) participants!: TransactionParticipantType[];
  @Field(() => [String], { description: 'The collections it wrote.' }) namespaces!: string[];
}

@ObjectType('Transactions')
export class TransactionsType {
  @Field(() => [TransactionType]) transactions!: TransactionType[];
  @Field(() => [String], { description: 'Shards that did not answer: their transactions are missing from the list.' })
  unreachableShards!: string[];
}

@ObjectType('TransactionShardOutcome', { description: "What one shard did with an operator's abort or resolve." })
export class TransactionShardOutcomeType {
  @Field() shard!: string;
  @Field({
    description:
      'aborted; for a resolve, the decision applied (commit, abort), pending (its coordinator is deciding), notPrepared or notHere; failed',
  })
  outcome!: string;
  @Field(() => String, { nullable: true }) error!: string | null;
}

const identity = (value: unknown) => value;

/** The cluster's transactions, for operators: the list, the decisions as they are taken, and the two actions. */
@Resolver()
@UseGuards(ControlPlaneGuard)
@UseInterceptors(AuditInterceptor)
export class TransactionsResolver {
  constructor(
    private readonly cluster: ClusterTransactions,
    private readonly events: EventBusService,
  ) {}

  @Subscription(() => EventType, {
    description:
      'Events of the transactions topic: transaction.decisions rows, each with the commit and abort decisions a shard took (who decided, why, the commit time and participants).',
    resolve: identity,
  })
  transactionEvents(@Args('since', { type: () => Float, nullable: true }) since?: number): AsyncIterableIterator<ClusterEvent> {
    return toAsyncIterator(this.events.stream((e) => e.topics.includes('transactions'), since ?? undefined));
  }

  @Mutation(() => [TransactionShardOutcomeType], {
    description:
      'Aborts a transaction on every shard that holds it open and not yet prepared. A prepared (in doubt) one is refused there: its coordinator decides; use resolveTransaction.',
  })
  abortTransaction(
    @Args('lsid') lsid: string,
    @Args('txnNumber', { type: () => Float }) txnNumber: number,
  ): Promise<TransactionShardOutcomeType[]> {
    return this.cluster.abort({ lsid: { id: lsid }, txnNumber });
  }

  @Mutation(() => [TransactionShardOutcomeType], {
    description:
      'Resolves an in-doubt transaction now: every shard holding it prepared asks its coordinator for the decision and applies it (no record there means abort).',
  })
  resolveTransaction(
    @Args('lsid') lsid: string,
    @Args('txnNumber', { type: () => Float }) txnNumber: number,
  ): Promise<TransactionShardOutcomeType[]> {
    return this.cluster.resolve({ lsid: { id: lsid }, txnNumber });
  }

  @Query(() => TransactionsType, { description: 'Transactions in progress, preparing, in doubt or committing, oldest first.' })
  async transactions(): Promise<TransactionsType> {
    const { transactions, unreachableShards } = await this.cluster.list();
    const now = Date.now();
    return {
      transactions: transactions.map((t) => ({ ...t, ageMs: t.startedAt === null ? null : now - Date.parse(t.startedAt) })),
      unreachableShards,
    };
  }
}
