// The workloads' shared logic: plain modules with no k6 import, used by the k6 scripts and by
// the project's own tests (unit specs beside each module, and test/e2e/loadtests.e2e.spec.ts).
// Imports carry the .ts extension because k6 loads these files as they are.
export * from './documents.ts';
export * from './graphql.ts';
export * from './graphql-ws.ts';
export * from './keys.ts';
export * from './options.ts';
export * from './report.ts';
export * from './retryable-writes.ts';
export * from './router-pool.ts';
export * from './router-roll.ts';
export * from './steps.ts';
export * from './summary.ts';
export * from './transactions.ts';
export * from './workloads.ts';
