export * from './errors.js';
export * from './values/value.js';
export * from './values/compare-values.js';
export * from './values/utf8.js';
export * from './values/extended-json.js';
export * from './keys/key-encoding.js';
