import { describe, expect, it } from 'vitest';
import {
  FAILED_SIGN_IN_WINDOW_MS,
  FIRST_SIGN_IN_DELAY_MS,
  FREE_FAILED_SIGN_INS,
  FailedSignIns,
  MAX_SIGN_IN_DELAY_MS,
} from './failed-sign-ins.js';

describe('FailedSignIns', () => {
  it('lets the free failures through at once, then doubles the wait up to its limit', () => {
    const signIns = new FailedSignIns();
    const subjects = ['user:ana', 'address:10.0.0.1'];
    const delays: number[] = [];
    for (let i = 0; i < FREE_FAILED_SIGN_INS + 8; i++) {
      delays.push(signIns.delayMs(subjects, 0));
      signIns.failed(subjects, 0);
    }
    expect(delays.slice(0, FREE_FAILED_SIGN_INS + 1)).toEqual(Array(FREE_FAILED_SIGN_INS + 1).fill(0));
    expect(delays.slice(FREE_FAILED_SIGN_INS + 1, FREE_FAILED_SIGN_INS + 4)).toEqual([
      FIRST_SIGN_IN_DELAY_MS,
      FIRST_SIGN_IN_DELAY_MS * 2,
      FIRST_SIGN_IN_DELAY_MS * 4,
    ]);
    expect(delays.at(-1)).toBe(MAX_SIGN_IN_DELAY_MS);
  });

  it('slows a spray over many users from one address, and one user tried from many addresses', () => {
    const signIns = new FailedSignIns();
    for (let i = 0; i <= FREE_FAILED_SIGN_INS; i++) signIns.failed([`user:u${i}`, 'address:a'], 0);
    expect(signIns.delayMs(['user:new', 'address:a'], 0)).toBe(FIRST_SIGN_IN_DELAY_MS);
    for (let i = 0; i <= FREE_FAILED_SIGN_INS; i++) signIns.failed(['user:ana', `address:b${i}`], 0);
    expect(signIns.delayMs(['user:ana', 'address:fresh'], 0)).toBe(FIRST_SIGN_IN_DELAY_MS);
    expect(signIns.delayMs(['user:other', 'address:fresh'], 0)).toBe(0);
  });

  it("forgets failures past the window, and a user's after its success", () => {
    const signIns = new FailedSignIns();
    for (let i = 0; i <= FREE_FAILED_SIGN_INS; i++) signIns.failed(['user:ana', 'address:a'], 0);
    expect(signIns.delayMs(['user:ana'], FAILED_SIGN_IN_WINDOW_MS)).toBe(FIRST_SIGN_IN_DELAY_MS);
    expect(signIns.delayMs(['user:ana'], FAILED_SIGN_IN_WINDOW_MS + 1)).toBe(0);
    for (let i = 0; i <= FREE_FAILED_SIGN_INS; i++) signIns.failed(['user:bo', 'address:c'], 0);
    signIns.succeeded('user:bo');
    expect(signIns.delayMs(['user:bo'], 0)).toBe(0);
    expect(signIns.delayMs(['address:c'], 0)).toBe(FIRST_SIGN_IN_DELAY_MS);
  });
});
