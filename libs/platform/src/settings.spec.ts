import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { SettingsError, advertisedUrl, commonSettingsShape, loadSettings, millisecondsSetting } from './settings.js';

const schema = z.object({ ...commonSettingsShape(7101), TESSERA_INTERVAL_MS: millisecondsSetting(5_000) });
const key = 'k'.repeat(32);

function problemsOf(env: Record<string, string>): string[] {
  try {
    loadSettings(schema, env);
  } catch (error) {
    if (error instanceof SettingsError) return error.problems;
    throw error;
  }
  throw new Error('expected a SettingsError');
}

describe('loadSettings', () => {
  it('applies every default when only the required settings are given', () => {
    const settings = loadSettings(schema, { TESSERA_CLUSTER_KEY: key });
    expect(settings).toMatchObject({
      TESSERA_HOST: '127.0.0.1',
      TESSERA_PORT: 7101,
      TESSERA_LOG_LEVEL: 'info',
      TESSERA_SHUTDOWN_TIMEOUT_MS: 10_000,
      TESSERA_STOP_ON_STDIN_CLOSE: false,
      TESSERA_INTERVAL_MS: 5_000,
    });
    expect(Object.isFrozen(settings)).toBe(true);
  });

  it('reads numbers and booleans from their text', () => {
    const settings = loadSettings(schema, {
      TESSERA_CLUSTER_KEY: key,
      TESSERA_PORT: '8000',
      TESSERA_STOP_ON_STDIN_CLOSE: 'true',
      TESSERA_INTERVAL_MS: '250',
    });
    expect([settings.TESSERA_PORT, settings.TESSERA_STOP_ON_STDIN_CLOSE, settings.TESSERA_INTERVAL_MS]).toEqual([8000, true, 250]);
  });

  it('treats an empty variable as unset', () => {
    expect(loadSettings(schema, { TESSERA_CLUSTER_KEY: key, TESSERA_PORT: '' }).TESSERA_PORT).toBe(7101);
  });

  it('lists every problem at once, each naming its variable and what was given', () => {
    const problems = problemsOf({ TESSERA_PORT: '70000', TESSERA_INTERVAL_MS: '-1', TESSERA_LOG_LEVEL: 'chatty' });
    expect(problems).toHaveLength(4);
    expect(problems[0]).toMatch(/^TESSERA_CLUSTER_KEY: is required.*\(not set\)$/);
    expect(problems.find((p) => p.startsWith('TESSERA_PORT:'))).toContain('got "70000"');
    expect(problems.find((p) => p.startsWith('TESSERA_INTERVAL_MS:'))).toContain('got "-1"');
    expect(problems.find((p) => p.startsWith('TESSERA_LOG_LEVEL:'))).toContain('got "chatty"');
  });

  it('never echoes a secret it refuses', () => {
    const problems = problemsOf({ TESSERA_CLUSTER_KEY: 'too-short-secret' });
    expect(problems.join('\n')).not.toContain('too-short-secret');
    expect(problems[0]).toContain('given (hidden)');
  });
});

describe('advertisedUrl', () => {
  it('is the host and port unless an advertised URL is set', () => {
    expect(advertisedUrl({ TESSERA_HOST: '127.0.0.1', TESSERA_PORT: 7101 })).toBe('http://127.0.0.1:7101');
    expect(advertisedUrl({ TESSERA_HOST: '0.0.0.0', TESSERA_PORT: 7101, TESSERA_ADVERTISE_URL: 'http://shard0:7101/' })).toBe(
      'http://shard0:7101',
    );
  });
});
