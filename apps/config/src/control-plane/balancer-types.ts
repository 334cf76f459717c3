import { Field, Float, InputType, Int, ObjectType } from '@nestjs/graphql';
import { JsonScalar } from './json.scalar.js';

// The balancer's GraphQL types: its status, a collection's compliance, and the cluster settings.

@ObjectType('BalancerRoundMigration', { description: 'One migration a balancer round issued.' })
export class BalancerRoundMigrationType {
  @Field() ns!: string;
  @Field() from!: string;
  @Field() to!: string;
  @Field(() => JsonScalar, { description: 'The chunk min as a shard-key document (Extended JSON).' }) min!: unknown;
  @Field(() => JsonScalar) max!: unknown;
  @Field({ description: 'drain, zoneViolation, imbalance, ...' }) reason!: string;
  @Field({ description: 'moved, failed or skipped' }) outcome!: string;
}

@ObjectType('BalancerRoundError')
export class BalancerRoundErrorType {
  @Field(() => String, { nullable: true }) ns!: string | null;
  @Field() code!: string;
  @Field() message!: string;
}

@ObjectType('BalancerRound', { description: "The leader's last balancer round." })
export class BalancerRoundType {
  @Field() startedAt!: string;
  @Field(() => Float) durationMs!: number;
  @Field(() => Float, { description: 'Snapshot, zone splits and selection, until the migration throttle (MongoDB: selectionTimeMillis).' })
  selectionTimeMillis!: number;
  @Field(() => Float, { description: 'The sleep before the migrations (TESSERA_BALANCER_MIGRATIONS_THROTTLING_MS); 0 when none.' })
  throttleTimeMillis!: number;
  @Field(() => Float, { description: 'The migrations, issued together and awaited; 0 when none.' }) migrationTimeMillis!: number;
  @Field(() => [BalancerRoundMigrationType]) migrations!: BalancerRoundMigrationType[];
  @Field(() => [BalancerRoundErrorType]) errors!: BalancerRoundErrorType[];
}

@ObjectType('BalancerThrottle', { description: "The continuous scheduler's throttle: the routers' write latency and the byte rate." })
export class BalancerThrottleType {
  @Field({ description: 'fullSpeed, or throttled: migrations go one at a time, pauseMs apart, or clone at cloneShare of their speed' })
  state!: string;
  @Field(() => String, { nullable: true, description: 'Why throttled' }) reason!: string | null;
  @Field(() => Float) pauseMs!: number;
  @Field(() => Float, { description: 'The share of its speed a clone runs at; 1: full speed' }) cloneShare!: number;
  @Field(() => Float, { nullable: true, description: "The routers' write p99 while no migration ran (medians of recent windows)" })
  idleWriteP99Ms!: number | null;
  @Field(() => Float, { nullable: true, description: "The routers' write p99 in the last window with migrations running" })
  migratingWriteP99Ms!: number | null;
  @Field(() => Float) targetLatencyMultiple!: number;
  @Field(() => Float, { description: '0: no limit' }) maxBytesPerSecond!: number;
  @Field(() => Float, { description: "Bytes the balancer's migrations moved per second over the last 10 s" })
  currentBytesPerSecond!: number;
  @Field(() => Float) migrationsInFlight!: number;
  @Field(() => Int, {
    nullable: true,
    description: 'The most migrations at once while writes run (grows by one per window within the target); null: no limit',
  })
  concurrencyLimit!: number | null;
}

@ObjectType('BalancerStatus', { description: "MongoDB's balancerStatus, as the config leader sees it." })
export class BalancerStatusType {
  @Field({ description: 'full or off' }) mode!: string;
  @Field() inBalancerRound!: boolean;
  @Field(() => BalancerThrottleType) throttle!: BalancerThrottleType;
  @Field(() => BalancerRoundType, { nullable: true, description: 'null until the leader has run a round' })
  lastRound!: BalancerRoundType | null;
}

@ObjectType('BalancerCollectionStatus', { description: "MongoDB's balancerCollectionStatus." })
export class BalancerCollectionStatusType {
  @Field() balancerCompliant!: boolean;
  @Field(() => String, { nullable: true, description: 'draining, zoneViolation, chunksImbalance or defragmentingChunks' })
  firstComplianceViolation!: string | null;
}

@ObjectType('BalancingWindow', { description: "Migrations start only between these times of day (HH:MM, the config server's time zone)." })
export class BalancingWindowType {
  @Field() start!: string;
  @Field() stop!: string;
}

@ObjectType('BalancerSettings')
export class BalancerSettingsType {
  @Field({ description: 'full or off' }) mode!: string;
  @Field(() => BalancingWindowType, { nullable: true, description: 'null: any time' }) activeWindow!: BalancingWindowType | null;
  @Field({ description: "Each migration waits for its range deletion (MongoDB's _waitForDelete)." }) waitForDelete!: boolean;
  @Field({ description: 'dataSize or chunkCount' }) policy!: string;
  @Field() attemptToBalanceJumboChunks!: boolean;
  @Field({ description: "continuous (a shard's next migration is planned as soon as its last one ends) or rounds (MongoDB's)" })
  scheduler!: string;
  @Field(() => Int, {
    description:
      'Under continuous: migrations one donor serves at once; 0: as many as there are free recipients, within the load throttle.',
  })
  maxDonationsPerShard!: number;
}

@ObjectType('ClusterSettings')
export class ClusterSettingsType {
  @Field(() => BalancerSettingsType) balancer!: BalancerSettingsType;
  @Field(() => Float, { description: 'The max chunk size of collections that set none.' }) chunkSizeBytes!: number;
  @Field() autoSplit!: boolean;
}

@InputType('BalancingWindowInput')
export class BalancingWindowInput {
  @Field({ description: 'HH:MM' }) start!: string;
  @Field({ description: 'HH:MM; before start, the window wraps midnight' }) stop!: string;
}

@InputType('ClusterSettingsInput', { description: 'A partial update: fields left out keep their value.' })
export class ClusterSettingsInput {
  @Field({ nullable: true, description: 'full or off' }) balancerMode?: string;
  @Field(() => BalancingWindowInput, { nullable: true, description: 'null removes the window' }) activeWindow?: BalancingWindowInput | null;
  @Field({ nullable: true }) waitForDelete?: boolean;
  @Field({ nullable: true, description: 'dataSize or chunkCount' }) policy?: string;
  @Field({ nullable: true }) attemptToBalanceJumboChunks?: boolean;
  @Field({ nullable: true, description: 'continuous or rounds' }) scheduler?: string;
  @Field(() => Int, { nullable: true, description: '0 to 64; 0: as many as there are free recipients.' }) maxDonationsPerShard?: number;
  @Field(() => Float, { nullable: true, description: 'At least 65536 (64 KiB).' }) chunkSizeBytes?: number;
  @Field({ nullable: true }) autoSplit?: boolean;
}
