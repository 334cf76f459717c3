export * from './catalog-cache.js';
export * from './shard-registry.js';
export * from './stale-retry.js';
