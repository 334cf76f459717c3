import { Identity1763900000000 } from './1763900000000-identity.js';

/** A shard database's migrations, in order. */
export const shardMigrations = [Identity1763900000000];
