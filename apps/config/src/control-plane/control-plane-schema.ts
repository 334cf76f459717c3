import { AccessResolver } from './access.resolver.js';
import { NestFactory } from '@nestjs/core';
import { GraphQLSchemaBuilderModule, GraphQLSchemaFactory } from '@nestjs/graphql';
import { lexicographicSortSchema, printSchema } from 'graphql';
import { AdminResolver } from './admin.resolver.js';
import { BalancerResolver } from './balancer.resolver.js';
import { ClusterTimeKeysResolver } from './cluster-time-keys.resolver.js';
import { ClusterResolver, DatabaseResolver, ShardResolver } from './cluster.resolver.js';
import { CollectionResolver } from './collection.resolver.js';
import { EventsResolver } from './events.resolver.js';
import { SessionsResolver } from './sessions.resolver.js';
import { TransactionsResolver } from './transactions.resolver.js';

/** Every resolver of the control plane: the module registers these, and the schema is built from them. */
export const CONTROL_PLANE_RESOLVERS = [
  ClusterResolver,
  ShardResolver,
  DatabaseResolver,
  CollectionResolver,
  EventsResolver,
  AdminResolver,
  BalancerResolver,
  SessionsResolver,
  TransactionsResolver,
  ClusterTimeKeysResolver,
  AccessResolver,
] as const;

/** The SDL the config server serves (sorted, as `sortSchema` sorts it): what `schema.graphql` must hold. */
export async function printControlPlaneSchema(): Promise<string> {
  const app = await NestFactory.createApplicationContext(GraphQLSchemaBuilderModule, { logger: false });
  try {
    const schema = await app.get(GraphQLSchemaFactory).create([...CONTROL_PLANE_RESOLVERS]);
    return `${printSchema(lexicographicSortSchema(schema))}\n`;
  } finally {
    await app.close();
  }
}
