import { describe, expect, it } from 'vitest';
import { OptionsError, defaultNamespace, describeOptions, parseBytes, parseDuration, parseWorkloadOptions } from './options.ts';

const env = { ADMIN_TOKEN: 'admin-token-0123456789' };

describe('workload options', () => {
  it.each([
    ['30s', 30_000],
    ['2m', 120_000],
    ['1m30s', 90_000],
    ['500ms', 500],
    ['1h', 3_600_000],
    ['45', 45_000],
  ])('reads the duration %s as %d ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each(['', 'soon', '10 s', '5d', 's30'])('refuses the duration "%s"', (text) => {
    expect(parseDuration(text)).toBeUndefined();
  });

  it.each([
    ['65536', 65536],
    ['64KiB', 65536],
    ['64kb', 65536],
    ['1MiB', 1048576],
    ['1.5M', 1572864],
  ])('reads the size %s as %d bytes', (text, bytes) => {
    expect(parseBytes(text)).toBe(bytes);
  });

  it('fills in defaults that suit a local cluster', () => {
    const options = parseWorkloadOptions('insert-random', env);
    expect(options).toMatchObject({
      routerUrl: 'http://127.0.0.1:7070',
      configUrl: 'http://127.0.0.1:7080',
      vus: 8,
      duration: '60s',
      durationMs: 60_000,
      chunkSizeBytes: 65536,
      docBytes: 1024,
      ns: 'load.insert_random',
      maxErrorRate: 0.001,
      viewerToken: env.ADMIN_TOKEN,
      apiKey: '',
      summaryPath: 'loadtests/results/insert-random-summary.json',
    });
    expect(defaultNamespace('add-shard-under-load')).toBe('load.add_shard_under_load');
  });

  it('reads every variable the README documents', () => {
    const options = parseWorkloadOptions('add-shard-under-load', {
      ...env,
      ROUTER_URL: 'http://router:7070/',
      CONFIG_URL: 'http://config:7080',
      VIEWER_TOKEN: 'viewer',
      API_KEY: 'tsk_0123456789ab_key',
      VUS: '3',
      DURATION: '2m',
      CHUNK_SIZE: '128KiB',
      DOC_BYTES: '512',
      BATCH: '25',
      NS: 'shop.orders',
      P99_MS: '250',
      SETTLE: '10s',
      NEW_SHARD_NAME: 'shard9',
      NEW_SHARD_URL: 'http://shard9:7109',
      ADD_SHARD_AFTER: '20s',
    });
    expect(options).toMatchObject({
      routerUrl: 'http://router:7070',
      viewerToken: 'viewer',
      apiKey: 'tsk_0123456789ab_key',
      vus: 3,
      durationMs: 120_000,
      chunkSizeBytes: 131072,
      docBytes: 512,
      batch: 25,
      ns: 'shop.orders',
      p99Ms: 250,
      settleMs: 10_000,
      newShardName: 'shard9',
      newShardUrl: 'http://shard9:7109',
      addShardAfterMs: 20_000,
      maxErrorRate: 0,
    });
  });

  it('adds the shard a third of the way through by default', () => {
    expect(parseWorkloadOptions('add-shard-under-load', { ...env, DURATION: '90s' }).addShardAfterMs).toBe(30_000);
  });

  it('names every bad variable at once and returns nothing half-parsed', () => {
    let caught: unknown;
    try {
      parseWorkloadOptions('insert-random', { VUS: '0', CHUNK_SIZE: '1000', DURATION: 'forever', ROUTER_URL: 'router:7070', NS: 'nodot' });
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(OptionsError);
    const problems = (caught as OptionsError).problems.join('\n');
    for (const name of [
      'ADMIN_TOKEN is required',
      'VUS must',
      'CHUNK_SIZE must be a size of at least 65536',
      'DURATION must',
      'ROUTER_URL must',
      'NS must',
    ])
      expect(problems).toContain(name);
  });

  it('keeps the tokens out of what the summary records', () => {
    const described = describeOptions(parseWorkloadOptions('crud-mix', { ...env, VIEWER_TOKEN: 'viewer-secret', API_KEY: 'key-secret' }));
    expect(JSON.stringify(described)).not.toContain(env.ADMIN_TOKEN);
    expect(JSON.stringify(described)).not.toContain('viewer-secret');
    expect(JSON.stringify(described)).not.toContain('key-secret');
    expect(described.workload).toBe('crud-mix');
  });
});
