import { UseGuards } from '@nestjs/common';
import { Field, Float, ObjectType, Query, Resolver } from '@nestjs/graphql';
import { ClusterTransactions } from '../transactions/cluster-transactions.service.js';
import { ControlPlaneGuard } from './control-plane.guard.js';

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

/** The cluster's transactions, for operators. */
@Resolver()
@UseGuards(ControlPlaneGuard)
export class TransactionsResolver {
  constructor(private readonly cluster: ClusterTransactions) {}

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
