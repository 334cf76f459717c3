export * from './cluster-auth.js';
export * from './config-client.js';
export * from './http-status.js';
export * from './internal-http-client.js';
export * from './messages.js';
export * from './shard-client.js';
export * from './clock-gossip.js';
export * from './ddl-messages.js';
