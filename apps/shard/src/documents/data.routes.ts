import type { HotRoute } from '@tessera/platform';
import type { ShardDataService } from './shard-data.service.js';

/**
 * The data commands every CRUD request reaches, served outside Nest's pipeline (see `HotRoute`):
 * insert and find. The others are DataController's. Validation happens in the service.
 */
export function dataHotRoutes(data: ShardDataService): HotRoute[] {
  return [
    { url: '/internal/data/insert', handle: (body) => data.insert(body as never) },
    { url: '/internal/data/find', handle: (body) => data.find(body as never) },
  ];
}
