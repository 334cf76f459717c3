import { describe, expect, it } from 'vitest';
import { isInsideActiveWindow } from './active-window.js';

const at = (hours: number, minutes: number) => new Date(2026, 0, 1, hours, minutes);

describe('the balancing window', () => {
  it('lets every time through when no window is set', () => {
    expect(isInsideActiveWindow(null, at(3, 0))).toBe(true);
  });

  it('includes the start and excludes the stop of a window within one day', () => {
    const window = { start: '09:00', stop: '17:30' };
    expect(isInsideActiveWindow(window, at(9, 0))).toBe(true);
    expect(isInsideActiveWindow(window, at(17, 29))).toBe(true);
    expect(isInsideActiveWindow(window, at(17, 30))).toBe(false);
    expect(isInsideActiveWindow(window, at(8, 59))).toBe(false);
  });

  it('wraps midnight when the stop is before the start', () => {
    const window = { start: '22:00', stop: '06:00' };
    expect(isInsideActiveWindow(window, at(23, 15))).toBe(true);
    expect(isInsideActiveWindow(window, at(0, 0))).toBe(true);
    expect(isInsideActiveWindow(window, at(5, 59))).toBe(true);
    expect(isInsideActiveWindow(window, at(6, 0))).toBe(false);
    expect(isInsideActiveWindow(window, at(12, 0))).toBe(false);
  });

  it('treats a window whose start equals its stop as the whole day', () => {
    expect(isInsideActiveWindow({ start: '04:00', stop: '04:00' }, at(16, 0))).toBe(true);
  });
});
