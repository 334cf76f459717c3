import { Registry1763900000000 } from './1763900000000-registry.js';

/** The config database's migrations, in order. Listed explicitly: globs do not load under ESM. */
export const configMigrations = [Registry1763900000000];
