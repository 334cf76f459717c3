import { describe, expect, it } from 'vitest';
import { migrationThrottleMs } from './migration-throttle.js';

describe('the migration throttle', () => {
  it('sleeps the whole throttle when the round selected in no time', () => {
    expect(migrationThrottleMs(1000, 5000, 5000)).toBe(1000);
  });

  it("counts the round's snapshot and selection toward the throttle", () => {
    expect(migrationThrottleMs(1000, 5000, 5400)).toBe(600);
    expect(migrationThrottleMs(1000, 5000, 6400)).toBe(0);
  });

  it('does not sleep before the first migrations, nor with a throttle of 0', () => {
    expect(migrationThrottleMs(1000, null, 5000)).toBe(0);
    expect(migrationThrottleMs(0, 5000, 5000)).toBe(0);
  });
});
