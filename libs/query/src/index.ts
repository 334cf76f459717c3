export * from './filter/parse-filter.js';
export * from './filter/id-equality.js';
export * from './targeting/key-ranges.js';
export * from './targeting/target-shards.js';
