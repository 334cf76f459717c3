import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { TesseraError } from '@tessera/core';
import {
  type ClusterSettings,
  type ConfigureCollectionBalancingRequest,
  DEFAULT_CLUSTER_SETTINGS,
  type UpdateSettingsRequest,
  configureCollectionBalancingRequestSchema,
  updateSettingsRequestSchema,
} from '@tessera/protocol';
import { parseWith } from '@tessera/platform';
import { ChangelogService } from '../changelog/changelog.service.js';

/**
 * Cluster settings (MongoDB's config.settings) and per-collection balancing options
 * (configureCollectionBalancing): read by the balancer, the shards' auto-splitters and the
 * control plane. Every change is one transaction with its changelog row.
 */
@Injectable()
export class ClusterSettingsService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly changelog: ChangelogService,
  ) {}

  async get(): Promise<ClusterSettings> {
    const rows: Array<{ key: string; value: unknown }> = await this.dataSource.query('SELECT key, value FROM settings');
    const stored = new Map(rows.map((r) => [r.key, r.value]));
    return {
      balancer: { ...DEFAULT_CLUSTER_SETTINGS.balancer, ...(stored.get('balancer') as object | undefined) },
      chunkSizeBytes: (stored.get('chunksize') as { bytes?: number } | undefined)?.bytes ?? DEFAULT_CLUSTER_SETTINGS.chunkSizeBytes,
      autoSplit: (stored.get('autosplit') as { enabled?: boolean } | undefined)?.enabled ?? DEFAULT_CLUSTER_SETTINGS.autoSplit,
    };
  }

  async update(input: UpdateSettingsRequest): Promise<ClusterSettings> {
    const request = parseWith(updateSettingsRequestSchema, input, 'settings update');
    await this.dataSource.transaction(async (manager) => {
      await manager.query('LOCK TABLE settings IN SHARE ROW EXCLUSIVE MODE');
      const current = await this.get();
      const upsert = (key: string, value: unknown) =>
        manager.query(
          'INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()',
          [key, JSON.stringify(value)],
        );
      if (request.balancer !== undefined) {
        const changes = Object.fromEntries(Object.entries(request.balancer).filter(([, v]) => v !== undefined));
        await upsert('balancer', { ...current.balancer, ...changes });
      }
      if (request.chunkSizeBytes !== undefined) await upsert('chunksize', { bytes: request.chunkSizeBytes });
      if (request.autoSplit !== undefined) await upsert('autosplit', { enabled: request.autoSplit });
      await this.changelog.record(manager, { what: 'balancer.settings', details: { ...request } });
    });
    return this.get();
  }

  async configureCollectionBalancing(input: ConfigureCollectionBalancingRequest): Promise<{ ok: 1 }> {
    const request = parseWith(configureCollectionBalancingRequestSchema, input, 'configureCollectionBalancing request');
    await this.dataSource.transaction(async (manager) => {
      const rows: unknown[] = await manager.query('SELECT 1 FROM collections WHERE ns = $1 FOR UPDATE', [request.ns]);
      if (rows.length === 0) {
        throw new TesseraError('NAMESPACE_NOT_FOUND', `${request.ns} is not a sharded collection`, { details: { ns: request.ns } });
      }
      const sets: string[] = [];
      const params: unknown[] = [request.ns];
      const set = (column: string, value: unknown) => {
        params.push(value);
        sets.push(`${column} = $${params.length}`);
      };
      if (request.chunkSizeBytes !== undefined) set('max_chunk_size_bytes', request.chunkSizeBytes);
      if (request.enableBalancing !== undefined) set('balancing_enabled', request.enableBalancing);
      if (request.enableAutoMerger !== undefined) set('auto_merging_enabled', request.enableAutoMerger);
      // Starting (or stopping) defragmentation drops any state of an earlier run: it starts from phase 1.
      if (request.defragmentCollection !== undefined) {
        set('defragment_collection', request.defragmentCollection);
        set('defragmentation_state', null);
      }
      if (sets.length > 0) await manager.query(`UPDATE collections SET ${sets.join(', ')} WHERE ns = $1`, params);
      await this.changelog.record(manager, { what: 'balancer.configureCollection', ns: request.ns, details: { ...request } });
    });
    return { ok: 1 };
  }
}
