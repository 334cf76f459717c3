export { configMigrations } from './config/index.js';
export { shardMigrations } from './shard/index.js';
