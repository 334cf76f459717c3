import { Field, Float, ID, InputType, Int, ObjectType } from '@nestjs/graphql';
import { PageInfoType } from './graphql-types.js';

// The logical sessions' GraphQL types: the sessions table with which nodes cache each session.

@ObjectType('SessionNode', { description: 'A node that caches a session, as its last refresh reported it.' })
export class SessionNodeType {
  @Field({ description: 'The node name, e.g. router0 or shard1.' }) node!: string;
  @Field({ description: 'router or shard' }) role!: string;
  @Field() refreshedAt!: string;
  @Field(() => Int) openCursors!: number;
  @Field(() => Float, { nullable: true, description: 'The highest txnNumber the node has seen on the session.' })
  txnNumber!: number | null;
}

@ObjectType('Session', { description: 'A logical session of the sessions table (MongoDB: config.system.sessions).' })
export class SessionType {
  @Field(() => ID, { description: 'The session id (a UUID).' }) lsid!: string;
  @Field({ description: 'The latest use any node reported; the session expires localLogicalSessionTimeoutMinutes after it.' })
  lastUse!: string;
  @Field() startedAt!: string;
  @Field(() => Int, { description: 'Open cursors over every node that caches the session.' }) openCursors!: number;
  @Field(() => Float, {
    nullable: true,
    description: 'The highest txnNumber over the nodes; null without retryable writes or transactions.',
  })
  highestTxnNumber!: number | null;
  @Field(() => [SessionNodeType]) nodes!: SessionNodeType[];
}

@ObjectType('SessionConnection')
export class SessionConnectionType {
  @Field(() => [SessionType]) nodes!: SessionType[];
  @Field(() => PageInfoType, { description: 'endCursor is the lsid to pass as `after` for the next page.' }) pageInfo!: PageInfoType;
  @Field(() => Int, { description: 'Sessions matching the filter, all pages.' }) totalCount!: number;
}

@InputType('SessionFilter')
export class SessionFilterInput {
  @Field({ nullable: true, description: 'Exactly this session id.' }) lsid?: string;
  @Field({ nullable: true, description: 'Only sessions this node caches.' }) node?: string;
}
