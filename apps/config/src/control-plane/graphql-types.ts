import { Field, Float, ID, InputType, Int, ObjectType } from '@nestjs/graphql';
import { JsonScalar } from './json.scalar.js';

// The control plane's GraphQL types (code first). Times are ISO-8601 strings; versions are
// `major|minor` with the collection's epoch beside them where it matters.

@ObjectType('ClusterTimestamp', { description: 'A cluster timestamp {t: seconds, i: counter}.' })
export class ClusterTimestampType {
  @Field(() => Float) t!: number;
  @Field(() => Int) i!: number;
}

@ObjectType('VectorClock', { description: "This config process's vector clock." })
export class VectorClockType {
  @Field(() => ClusterTimestampType, { description: 'The latest ClusterTime this process has seen: the shards tick it for every write.' })
  clusterTime!: ClusterTimestampType;
  @Field(() => ClusterTimestampType) configTime!: ClusterTimestampType;
  @Field(() => ClusterTimestampType) topologyTime!: ClusterTimestampType;
}

@ObjectType('ClusterTimeKey', { description: 'A key that signs ClusterTime (its id and expiry; the secret is never served).' })
export class ClusterTimeKeyType {
  @Field({ description: 'The 64-bit key id, in decimal: the keyId of signatures made with this key.' }) keyId!: string;
  @Field({ description: 'When the key stops signing (it verifies for one more rotation interval).' }) expiresAt!: string;
}

@ObjectType('Shard')
export class ShardType {
  @Field(() => ID) name!: string;
  @Field() url!: string;
  @Field({ description: 'active or draining' }) state!: string;
  @Field(() => [String]) zones!: string[];
  @Field() addedAt!: string;
  @Field(() => Boolean, { nullable: true, description: 'null until the first health check of this config process' })
  reachable!: boolean | null;
  @Field(() => String, { nullable: true }) lastSeenAt!: string | null;
  @Field(() => String, { nullable: true }) lastError!: string | null;
}

@ObjectType('ShardStatistics', { description: "A shard's share of the catalog." })
export class ShardStatisticsType {
  @Field(() => Int) chunks!: number;
  @Field(() => Float, { description: 'Sum of the chunk size estimates the shard reported (0 when none).' })
  estimatedDataBytes!: number;
}

@ObjectType('Chunk')
export class ChunkType {
  @Field(() => JsonScalar, { description: 'Inclusive lower bound: the shard key values as Extended JSON.' }) min!: unknown;
  @Field(() => JsonScalar, { description: 'Exclusive upper bound.' }) max!: unknown;
  @Field() shard!: string;
  @Field({ description: 'major|minor' }) version!: string;
  @Field(() => Boolean, { nullable: true }) jumbo!: boolean | null;
  @Field(() => Float, {
    nullable: true,
    description: "The bytes its shard last measured in it; null until measured (a split's pieces start without one).",
  })
  estimatedSizeBytes!: number | null;
  @Field(() => Float, { nullable: true, description: 'The documents counted in the same measurement; null when not counted.' })
  estimatedDocuments!: number | null;
  @Field(() => JsonScalar, { nullable: true, description: 'Placements, newest first: [{validAfter, shard}].' }) history!: unknown;
}

@ObjectType('PageInfo')
export class PageInfoType {
  @Field() hasNextPage!: boolean;
  @Field(() => String, { nullable: true }) endCursor!: string | null;
}

@ObjectType('ChunkConnection')
export class ChunkConnectionType {
  @Field(() => [ChunkType]) nodes!: ChunkType[];
  @Field(() => PageInfoType) pageInfo!: PageInfoType;
  @Field(() => Int, { description: 'Chunks matching the filter, all pages.' }) totalCount!: number;
}

@ObjectType('ShardDistribution', { description: "One shard's part of a collection." })
export class ShardDistributionType {
  @Field() shard!: string;
  @Field(() => Int) chunks!: number;
  @Field(() => Float, { description: 'Sum of the chunk size estimates (0 when none reported).' }) estimatedDataBytes!: number;
  @Field(() => Float, {
    nullable: true,
    description: "Sum of the chunks' document estimates; null when none of the shard's chunks has one.",
  })
  documents!: number | null;
  @Field(() => Int, {
    description: 'Chunks with a size estimate: when fewer than chunks, the sums leave the others out.',
  })
  estimatedChunks!: number;
  @Field(() => Int, { description: 'Chunks flagged jumbo: the balancer leaves them unless attemptToBalanceJumboChunks is on.' })
  jumboChunks!: number;
}

@ObjectType('ZoneRange')
export class ZoneRangeType {
  @Field() ns!: string;
  @Field({ description: 'Inclusive lower bound, readable.' }) min!: string;
  @Field({ description: 'Exclusive upper bound, readable.' }) max!: string;
  @Field() zone!: string;
}

@ObjectType('Collection')
export class CollectionType {
  @Field(() => ID) ns!: string;
  @Field({
    description:
      'False for an unsharded collection (on its database primary shard, as Database.collections lists it): its sharding fields are null or false then.',
  })
  sharded!: boolean;
  @Field(() => String, { nullable: true }) uuid!: string | null;
  @Field(() => String, { nullable: true }) epoch!: string | null;
  @Field(() => JsonScalar, { nullable: true }) keyPattern!: unknown;
  @Field() unique!: boolean;
  @Field() balancingEnabled!: boolean;
  @Field() autoMergingEnabled!: boolean;
  @Field({ description: 'Being defragmented (configureCollectionBalancing defragmentCollection: true) until the last phase ends.' })
  defragmenting!: boolean;
  @Field(() => Float, { nullable: true, description: "The collection's max chunk size; null: the cluster's chunkSizeBytes." })
  chunkSizeBytes!: number | null;
  @Field() allowMigrations!: boolean;
  @Field(() => String, { nullable: true, description: 'major|minor' }) collectionVersion!: string | null;
}

@ObjectType('Database')
export class DatabaseType {
  @Field(() => ID) name!: string;
  @Field() primaryShard!: string;
  @Field() versionUuid!: string;
  @Field(() => Int) versionLastMod!: number;
}

@ObjectType('Router')
export class RouterType {
  @Field(() => ID) id!: string;
  @Field() url!: string;
  @Field() version!: string;
  @Field() startedAt!: string;
  @Field() lastPingAt!: string;
}

@ObjectType('ConfigLeader')
export class ConfigLeaderType {
  @Field() holder!: string;
  @Field() url!: string;
  @Field(() => Int) term!: number;
  @Field() expiresAt!: string;
}

@ObjectType('ClusterOverview')
export class ClusterOverviewType {
  @Field(() => [ShardType]) shards!: ShardType[];
  @Field(() => [DatabaseType]) databases!: DatabaseType[];
  @Field(() => [RouterType]) routers!: RouterType[];
  @Field(() => [ZoneRangeType]) zoneRanges!: ZoneRangeType[];
  @Field(() => ConfigLeaderType, { nullable: true }) leader!: ConfigLeaderType | null;
  @Field(() => VectorClockType) vectorClock!: VectorClockType;
  @Field(() => Float, { description: 'The last event seq this process delivered: subscribe with since = this to miss nothing.' })
  lastEventSeq!: number;
}

@ObjectType('Event', { description: 'One changelog entry, the unit of every stream.' })
export class EventType {
  @Field(() => Float, { description: 'Cluster-wide, in commit order: resume with since = the last one seen.' }) seq!: number;
  @Field() time!: string;
  @Field({ description: 'split, merge, moveChunk.commit, addShard, shardCollection.end, ...' }) kind!: string;
  @Field(() => [String], { description: 'placement, migrations, balancer, topology, ddl, sessions, transactions, reports' })
  topics!: string[];
  @Field(() => String, { nullable: true }) ns!: string | null;
  @Field(() => String, { nullable: true }) shard!: string | null;
  @Field() server!: string;
  @Field(() => JsonScalar) details!: unknown;
}

@ObjectType('EventConnection')
export class EventConnectionType {
  @Field(() => [EventType]) nodes!: EventType[];
  @Field(() => PageInfoType, { description: 'endCursor is the seq to pass as `after` for the next page.' }) pageInfo!: PageInfoType;
}

@ObjectType('PlacementChange', { description: 'Chunks before and after a placement change, with versions, and why.' })
export class PlacementChangeType {
  @Field(() => Float) seq!: number;
  @Field() time!: string;
  @Field(() => String, { nullable: true }) ns!: string | null;
  @Field({ description: 'The event kind: split, multi-split, merge, moveChunk.commit, clearJumboFlag, ...' }) reason!: string;
  @Field(() => [ChunkType]) before!: ChunkType[];
  @Field(() => [ChunkType]) after!: ChunkType[];
  @Field(() => EventType) event!: EventType;
}

@ObjectType('Setting')
export class SettingType {
  @Field() key!: string;
  @Field(() => JsonScalar) value!: unknown;
  @Field() updatedAt!: string;
}

@ObjectType('DdlOperation', {
  description: "A DDL coordinator (ddl_coordinators): the command, the phase it is in or 'done' / 'failed', its persisted state.",
})
export class DdlOperationType {
  @Field() id!: string;
  @Field({ description: 'shardCollection, refineCollectionShardKey, dropCollection, dropDatabase, movePrimary.' }) kind!: string;
  @Field({ description: "The locked resource: the namespace, or 'db:<name>' for a database." }) resource!: string;
  @Field({ description: "The phase it runs (or resumes at), or 'done' / 'failed'." }) phase!: string;
  @Field(() => JsonScalar) request!: unknown;
  @Field(() => JsonScalar, { description: 'What its phases have recorded so far (e.g. the collections movePrimary cloned).' })
  state!: unknown;
  @Field(() => JsonScalar, { nullable: true, description: 'The error that failed it.' }) error!: unknown;
  @Field() startedAt!: string;
  @Field({ description: 'When its last phase began or it ended.' }) updatedAt!: string;
}

@ObjectType('RemoveShardResult')
export class RemoveShardResultType {
  @Field({ description: 'started, ongoing or completed' }) state!: string;
  @Field() shard!: string;
  @Field(() => Int) remainingChunks!: number;
  @Field(() => Int, { description: 'jumbo chunks among remainingChunks' }) remainingJumboChunks!: number;
  @Field(() => Int) remainingDatabases!: number;
  @Field(() => Int, { description: 'migrations in flight to or from the shard' }) remainingMigrations!: number;
  @Field(() => [String]) dbsToMove!: string[];
  @Field(() => [String], { description: 'ids of the migrations in flight to or from the shard' }) migrationIds!: string[];
  @Field({ description: 'what holds the shard and what moves it on, in words' }) note!: string;
}

@ObjectType('DropResult')
export class DropResultType {
  @Field() ns!: string;
  @Field() dropped!: boolean;
}

@InputType('ClusterTimestampInput')
export class ClusterTimestampInput {
  @Field(() => Float) t!: number;
  @Field(() => Int) i!: number;
}

@InputType('ShardCollectionInput')
export class ShardCollectionInput {
  @Field() ns!: string;
  @Field(() => JsonScalar, { description: 'The shard key pattern, e.g. {"customer": 1} or {"_id": "hashed"}.' }) key!: unknown;
  @Field({ nullable: true }) unique?: boolean;
  @Field(() => Int, { nullable: true }) numInitialChunks?: number;
}

@InputType('ChangelogFilter')
export class ChangelogFilterInput {
  @Field({ nullable: true, description: 'Exactly this namespace (a collection or a database).' }) ns?: string;
  @Field(() => [String], { nullable: true, description: 'Event kinds, e.g. ["split", "merge"].' }) kinds?: string[];
  @Field(() => [String], {
    nullable: true,
    description:
      'Topics, e.g. ["placement"]: entries with any of them (placement, migrations, balancer, topology, ddl, sessions, transactions, reports).',
  })
  topics?: string[];
}

@ObjectType('MigrationPhaseTime')
export class MigrationPhaseTimeType {
  @Field() phase!: string;
  @Field() at!: string;
}

@ObjectType('MigrationResult', { description: 'A finished migration, as the donor reports it.' })
export class MigrationResultType {
  @Field() migrationId!: string;
  @Field() ns!: string;
  @Field() donor!: string;
  @Field() recipient!: string;
  @Field(() => JsonScalar) min!: unknown;
  @Field(() => JsonScalar) max!: unknown;
  @Field(() => Float) documentsCloned!: number;
  @Field(() => Float) bytesCloned!: number;
  @Field(() => Float) criticalSectionMs!: number;
  @Field(() => [MigrationPhaseTimeType]) phases!: MigrationPhaseTimeType[];
}

@ObjectType('MigrationOperation', {
  description:
    'A moveRange/moveChunk: at once `running` with an operation id (progress on migrationProgress; a moveRange.end event with this id when it ends), or with wait: true the finished migration.',
})
export class MigrationOperationType {
  @Field(() => ID) operationId!: string;
  @Field({ description: 'running, committed or failed' }) state!: string;
  @Field(() => MigrationResultType, { nullable: true }) result!: MigrationResultType | null;
  @Field(() => JsonScalar, { nullable: true, description: '{code, message} when failed' }) error!: unknown;
}

@ObjectType('ActiveMigration', { description: 'A migration in flight, with the last phase and progress its donor reported.' })
export class ActiveMigrationType {
  @Field(() => ID) migrationId!: string;
  @Field() ns!: string;
  @Field({ description: 'Inclusive lower bound, readable.' }) min!: string;
  @Field({ description: 'Exclusive upper bound, readable.' }) max!: string;
  @Field() donor!: string;
  @Field() recipient!: string;
  @Field() startedAt!: string;
  @Field({ description: 'registered, cloning, steady, criticalSection, ... (the last reported)' }) phase!: string;
  @Field(() => Float, { nullable: true }) documentsCloned!: number | null;
  @Field(() => Float, { nullable: true }) bytesCloned!: number | null;
  @Field(() => Float, {
    nullable: true,
    description:
      "The range's bytes: as the donor measured them when it started (moveChunk.start), else the chunk's size estimate; null when neither is known. Against bytesCloned and its rate, an ETA.",
  })
  estimatedBytes!: number | null;
  @Field(() => Float, { nullable: true, description: "The range's documents, from the same source as estimatedBytes." })
  estimatedDocuments!: number | null;
}

@ObjectType('PhaseDuration')
export class PhaseDurationType {
  @Field() phase!: string;
  @Field() startedAt!: string;
  @Field(() => Float, { nullable: true, description: 'Until the next phase began; null for the last.' }) ms!: number | null;
}

@ObjectType('RecentMigration', { description: "A migration that ended, from its donor's report." })
export class RecentMigrationType {
  @Field(() => Float) seq!: number;
  @Field(() => String, { nullable: true }) migrationId!: string | null;
  @Field() ns!: string;
  @Field(() => JsonScalar) min!: unknown;
  @Field(() => JsonScalar) max!: unknown;
  @Field() donor!: string;
  @Field() recipient!: string;
  @Field({ description: 'committed or failed' }) outcome!: string;
  @Field() endedAt!: string;
  @Field(() => String, { nullable: true }) error!: string | null;
  @Field(() => Float, { nullable: true }) documentsCloned!: number | null;
  @Field(() => Float, { nullable: true }) bytesCloned!: number | null;
  @Field(() => Float, { nullable: true }) criticalSectionMs!: number | null;
  @Field(() => [PhaseDurationType]) phases!: PhaseDurationType[];
}

@ObjectType('Migrations')
export class MigrationsType {
  @Field(() => [ActiveMigrationType]) active!: ActiveMigrationType[];
  @Field(() => [RecentMigrationType], { description: 'Newest first.' }) recent!: RecentMigrationType[];
}
