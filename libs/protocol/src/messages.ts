import { z } from 'zod';

/**
 * Wire contracts of the internal API, shared by servers (which validate with these schemas)
 * and clients (which send their inferred types). Times are ISO-8601 strings on the wire.
 */

/** A shard's name: letters, digits, `_` and `-`, as MongoDB's shard ids. */
export const shardNameSchema = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1-64 letters, digits, "_" or "-"');

/** An http(s) base URL without a path, query or fragment. */
export const nodeUrlSchema = z
  .url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' })
  .refine((value) => {
    const url = new URL(value);
    return (url.pathname === '/' || url.pathname === '') && url.search === '' && url.hash === '';
  }, 'must be a base URL with no path, query or fragment')
  .transform((value) => new URL(value).origin);

export const addShardRequestSchema = z.strictObject({ name: shardNameSchema, url: nodeUrlSchema });
export type AddShardRequest = z.input<typeof addShardRequestSchema>;

export type ShardState = 'active' | 'draining';

/** A shard as the config server knows it, with the last health check this process made. */
export interface ShardDescription {
  name: string;
  url: string;
  state: ShardState;
  zones: string[];
  addedAt: string;
  /** null until the first health check after the config process started. */
  reachable: boolean | null;
  lastSeenAt: string | null;
  lastError: string | null;
}

export const routerPingRequestSchema = z.strictObject({
  id: z.string().min(1).max(200),
  url: nodeUrlSchema,
  version: z.string().min(1).max(50),
  startedAt: z.iso.datetime(),
});
export type RouterPingRequest = z.input<typeof routerPingRequestSchema>;

/** A router (mongos) registered with the config server. */
export interface RouterDescription {
  id: string;
  url: string;
  version: string;
  startedAt: string;
  lastPingAt: string;
}

/** Identity of the cluster, answered to every registered router. */
export interface ClusterInfo {
  clusterId: string;
}

/**
 * The config processes a node reaches, as a connection string names a config replica set's
 * hosts: base URLs separated by commas (`http://config0:7080,http://config1:7080`); normalised.
 */
export const configSeedListSchema = z
  .string()
  .min(1)
  .transform((value, ctx) => {
    const urls = value.split(',').map((url) => url.trim());
    const parsed = urls.map((url) => nodeUrlSchema.safeParse(url));
    const bad = parsed.findIndex((p) => !p.success);
    if (bad >= 0) {
      ctx.addIssue({ code: 'custom', message: `"${urls[bad]}" in the config seed list must be an http:// or https:// base URL` });
      return z.NEVER;
    }
    return parsed.map((p) => p.data!).join(',');
  });

/**
 * What makes a shard a member of a cluster (MongoDB's shardIdentity document): set once by the
 * config server's addShard, refused if the shard already belongs to another cluster.
 */
export const shardIdentitySchema = z.strictObject({
  clusterId: z.string().min(1).max(100),
  shardName: shardNameSchema,
  /** Every config process the shard may reach (a seed list). */
  configUrl: configSeedListSchema,
});
export type ShardIdentity = z.output<typeof shardIdentitySchema>;

export interface ShardIdentityResponse {
  identity: ShardIdentity | null;
}

/** A database name as MongoDB allows it: no `/\. "$*<>:|?`, 1-63 bytes. */
export const databaseNameSchema = z
  .string()
  .min(1, 'must not be empty')
  .max(63, 'must be at most 63 characters')
  .regex(/^[^/\\. "$*<>:|?\0]+$/, 'must not contain / \\ . space " $ * < > : | ? or NUL');

/** `db.collection`: a valid database name, a dot, and a collection name not starting with `system.` or holding `$`. */
export const namespaceSchema = z
  .string()
  .max(255, 'must be at most 255 characters')
  .regex(
    /^[^/\\. "$*<>:|?\0]{1,63}\.[^$\0]+$/,
    'must be "database.collection" with a valid database name and no "$" in the collection name',
  )
  .refine((ns) => !ns.slice(ns.indexOf('.') + 1).startsWith('system.'), 'must not name a system collection');

/** A shard key pattern `{ field: 1 | "hashed", ... }` (fully checked by libs/core's parser). */
export const keyPatternSchema = z.record(z.string(), z.union([z.literal(1), z.literal('hashed')]));

/** What a shard needs to store a collection: its uuid, namespace and shard key. */
export const shardCollectionSpecSchema = z.strictObject({
  ns: namespaceSchema,
  keyPattern: keyPatternSchema,
  unique: z.boolean().default(false),
});
export type ShardCollectionSpec = z.input<typeof shardCollectionSpecSchema>;

/** A shard's size figures, for choosing primary shards and (later) balancing. */
export interface ShardStats {
  dataSizeBytes: number;
  collections: number;
}
