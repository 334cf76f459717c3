import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The authoritative catalog, modelled on MongoDB's config collections (config.databases,
 * config.collections, config.chunks, config.tags, config.settings, config.changelog,
 * config.locks, config.lockpings) plus the vector clock, the config leader lease and the DDL
 * coordinators' state documents.
 *
 * Shard keys are stored twice: as the order-preserving encoding of libs/core (`bytea`, compared
 * by the btree with memcmp, so ranges are plain byte ranges; decoding it gives the exact values)
 * and as Extended JSON for people. Key patterns and DDL requests are `json`, not `jsonb`: jsonb
 * reorders object keys, and a shard key's field order is its meaning.
 */
export class Catalog1763900100000 implements MigrationInterface {
  name = 'Catalog1763900100000';

  // Long: the whole initial schema, one statement per table, as a reviewer reads it.
  async up(q: QueryRunner): Promise<void> {
    // ConfigTime and TopologyTime as cluster timestamps {t: seconds, i: counter}. One row, locked
    // by every catalog write, so ticks are strictly increasing across config processes.
    await q.query(`
      CREATE TABLE vector_clock (
        singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
        config_time_t bigint NOT NULL DEFAULT 0,
        config_time_i bigint NOT NULL DEFAULT 0,
        topology_time_t bigint NOT NULL DEFAULT 0,
        topology_time_i bigint NOT NULL DEFAULT 0
      )`);
    await q.query('INSERT INTO vector_clock DEFAULT VALUES');

    await q.query(`
      CREATE TABLE databases (
        name text PRIMARY KEY,
        primary_shard text NOT NULL REFERENCES shards (name),
        version_uuid uuid NOT NULL,
        version_last_mod integer NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);

    await q.query(`
      CREATE TABLE collections (
        ns text PRIMARY KEY,
        db text NOT NULL REFERENCES databases (name),
        uuid uuid NOT NULL UNIQUE,
        epoch text NOT NULL,
        timestamp_t bigint NOT NULL,
        timestamp_i bigint NOT NULL,
        key_pattern json NOT NULL,
        is_unique boolean NOT NULL DEFAULT false,
        max_chunk_size_bytes bigint,
        balancing_enabled boolean NOT NULL DEFAULT true,
        auto_merging_enabled boolean NOT NULL DEFAULT true,
        defragment_collection boolean NOT NULL DEFAULT false,
        allow_migrations boolean NOT NULL DEFAULT true,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      )`);

    await q.query(`
      CREATE TABLE chunks (
        id bigserial PRIMARY KEY,
        collection_uuid uuid NOT NULL REFERENCES collections (uuid) ON DELETE CASCADE,
        min bytea NOT NULL,
        max bytea NOT NULL,
        min_ejson text NOT NULL,
        max_ejson text NOT NULL,
        shard text NOT NULL REFERENCES shards (name),
        major integer NOT NULL,
        minor integer NOT NULL,
        history jsonb NOT NULL DEFAULT '[]',
        jumbo boolean NOT NULL DEFAULT false,
        estimated_size_bytes bigint,
        CHECK (min < max)
      )`);
    // Routing lookups go by (collection, max): the chunk holding key k is the first with max > k.
    await q.query('CREATE UNIQUE INDEX chunks_collection_max ON chunks (collection_uuid, max)');
    await q.query('CREATE UNIQUE INDEX chunks_collection_min ON chunks (collection_uuid, min)');
    // Incremental refresh reads the chunks newer than a cached collection version.
    await q.query('CREATE INDEX chunks_collection_version ON chunks (collection_uuid, major, minor)');
    await q.query('CREATE INDEX chunks_collection_shard ON chunks (collection_uuid, shard)');

    await q.query(`
      CREATE TABLE tags (
        ns text NOT NULL,
        min bytea NOT NULL,
        max bytea NOT NULL,
        min_ejson text NOT NULL,
        max_ejson text NOT NULL,
        tag text NOT NULL,
        PRIMARY KEY (ns, min),
        CHECK (min < max)
      )`);

    await q.query(`
      CREATE TABLE settings (
        key text PRIMARY KEY,
        value jsonb NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now()
      )`);

    await q.query(`
      CREATE TABLE changelog (
        id bigserial PRIMARY KEY,
        time timestamptz NOT NULL DEFAULT now(),
        server text NOT NULL,
        shard text,
        what text NOT NULL,
        ns text,
        details jsonb NOT NULL DEFAULT '{}'
      )`);
    await q.query('CREATE INDEX changelog_time ON changelog (time)');
    await q.query('CREATE INDEX changelog_ns_time ON changelog (ns, time)');

    // Distributed locks (config.locks) held by a process that keeps its config.lockpings row
    // fresh; a lock whose holder stopped pinging past the timeout may be taken over.
    await q.query(`
      CREATE TABLE lockpings (
        process text PRIMARY KEY,
        ping timestamptz NOT NULL
      )`);
    await q.query(`
      CREATE TABLE locks (
        resource text PRIMARY KEY,
        process text NOT NULL,
        operation text NOT NULL,
        why text NOT NULL,
        acquired_at timestamptz NOT NULL DEFAULT now()
      )`);

    // Exactly one config process holds the lease and runs primary-only services.
    await q.query(`
      CREATE TABLE leader_lease (
        singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
        holder text NOT NULL,
        holder_url text NOT NULL,
        term bigint NOT NULL,
        expires_at timestamptz NOT NULL
      )`);

    // DDL coordinators' state documents: the phase is written before the phase runs, so a new
    // leader resumes each coordinator from the phase it had reached.
    await q.query(`
      CREATE TABLE ddl_coordinators (
        id uuid PRIMARY KEY,
        kind text NOT NULL,
        resource text NOT NULL,
        phase text NOT NULL,
        request json NOT NULL,
        state json NOT NULL DEFAULT '{}',
        error jsonb,
        leader_term bigint NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query("CREATE UNIQUE INDEX ddl_coordinators_running ON ddl_coordinators (resource) WHERE phase NOT IN ('done', 'failed')");
  }

  async down(q: QueryRunner): Promise<void> {
    for (const table of [
      'ddl_coordinators',
      'leader_lease',
      'locks',
      'lockpings',
      'changelog',
      'settings',
      'tags',
      'chunks',
      'collections',
      'databases',
      'vector_clock',
    ]) {
      await q.query(`DROP TABLE ${table}`);
    }
  }
}
