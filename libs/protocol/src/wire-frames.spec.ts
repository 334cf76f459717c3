import { describe, expect, it, vi } from 'vitest';
import {
  type Frame,
  FrameReader,
  MAX_HEAD_BYTES,
  type OversizedFrame,
  WireFrameError,
  type WireRequestHead,
  encodeFrame,
} from './wire-frames.js';

const head = (id: number): WireRequestHead => ({ id, method: 'POST', path: '/internal/data/find', headers: { 'x-tessera-date': '1' } });
/** A frame's body as text, or how many bytes it had when it was dropped as too large. */
const bodyOf = (frame: Frame<WireRequestHead> | OversizedFrame<WireRequestHead>) =>
  'body' in frame ? frame.body.toString('utf8') : frame.oversizedBytes;

describe('wire frames', () => {
  it('reads back what was encoded, the body as the bytes sent (multi-byte characters too)', () => {
    const reader = new FrameReader<WireRequestHead>(1024);
    const [frame, ...rest] = reader.push(encodeFrame(head(1), '{"filter":{"k":"é€😀"}}'));
    expect(rest).toEqual([]);
    expect(frame!.head).toEqual(head(1));
    expect(bodyOf(frame!)).toBe('{"filter":{"k":"é€😀"}}');
  });

  it('cuts frames out of a stream however it is chunked: several in one chunk, one over many', () => {
    const stream = Buffer.concat([encodeFrame(head(1), '{"a":1}'), encodeFrame(head(2), ''), encodeFrame(head(3), '"ü"'.repeat(50))]);
    for (const size of [1, 3, 7, 64, stream.length]) {
      const reader = new FrameReader<WireRequestHead>(1024);
      const frames = [];
      for (let at = 0; at < stream.length; at += size) frames.push(...reader.push(stream.subarray(at, at + size)));
      expect(frames.map((f) => [f.head.id, bodyOf(f)])).toEqual([
        [1, '{"a":1}'],
        [2, ''],
        [3, '"ü"'.repeat(50)],
      ]);
    }
  });

  it('copies a large frame arriving in many chunks once, not once per chunk', () => {
    const body = `"${'x'.repeat(4 * 1024 * 1024)}"`;
    const stream = encodeFrame(head(1), body);
    const reader = new FrameReader<WireRequestHead>(64 * 1024 * 1024);
    const concat = vi.spyOn(Buffer, 'concat');
    const frames = [];
    try {
      for (let at = 0; at < stream.length; at += 64 * 1024) frames.push(...reader.push(stream.subarray(at, at + 64 * 1024)));
      const copied = concat.mock.calls.reduce((sum, [list]) => sum + list.reduce((bytes, b) => bytes + b.length, 0), 0);
      expect(copied).toBe(stream.length);
    } finally {
      concat.mockRestore();
    }
    expect(frames.map((f) => bodyOf(f) === body)).toEqual([true]);
  });

  it('gives a frame over the limit its head alone and drops its body as it comes, so the frames after it are read', () => {
    const big = encodeFrame(head(2), 'x'.repeat(5000));
    const stream = Buffer.concat([encodeFrame(head(1), '"a"'), big, encodeFrame(head(3), '"b"')]);
    for (const size of [1, 5, 100, 4096, stream.length]) {
      const reader = new FrameReader<WireRequestHead>(1024);
      const frames = [];
      for (let at = 0; at < stream.length; at += size) frames.push(...reader.push(stream.subarray(at, at + size)));
      expect(frames.map((f) => [f.head, bodyOf(f)])).toEqual([
        [head(1), '"a"'],
        [head(2), 5000],
        [head(3), '"b"'],
      ]);
    }
  });

  it('keeps nothing of an oversized body while it is dropped', () => {
    const reader = new FrameReader<WireRequestHead>(1024);
    const stream = Buffer.concat([encodeFrame(head(1), 'x'.repeat(100_000)), encodeFrame(head(2), '"b"')]);
    const frames = [];
    for (let at = 0; at < stream.length; at += 300) {
      frames.push(...reader.push(stream.subarray(at, at + 300)));
      // Each chunk held, even as an empty view, would keep its memory.
      expect((reader as unknown as { pending: Buffer[] }).pending.length).toBeLessThanOrEqual(1);
    }
    expect(frames.map(bodyOf)).toEqual([100_000, '"b"']);
  });

  it('keeps no more than the bytes after the last whole frame, not the buffer they were cut from', () => {
    const reader = new FrameReader<WireRequestHead>(4 * 1024 * 1024);
    const next = encodeFrame(head(2), '"after"');
    const [frame] = reader.push(Buffer.concat([encodeFrame(head(1), `"${'x'.repeat(2 * 1024 * 1024)}"`), next.subarray(0, 10)]));
    expect(frame!.head.id).toBe(1);
    const kept = (reader as unknown as { pending: Buffer[] }).pending;
    expect(kept.map((b) => b.buffer.byteLength < 1024 * 1024)).toEqual([true]);
    expect(reader.push(next.subarray(10)).map(bodyOf)).toEqual(['"after"']);
  });

  it('refuses garbage: a head that is not JSON, has no id, or overruns its frame', () => {
    const raw = (headText: string, headLength = Buffer.byteLength(headText)) => {
      const frame = Buffer.alloc(8 + Buffer.byteLength(headText));
      frame.writeUInt32BE(4 + Buffer.byteLength(headText), 0);
      frame.writeUInt32BE(headLength, 4);
      frame.write(headText, 8);
      return frame;
    };
    expect(() => new FrameReader(1024).push(raw('{nope'))).toThrow('frame head is not JSON');
    expect(() => new FrameReader(1024).push(raw('{"method":"GET"}'))).toThrow('frame head has no numeric id');
    expect(() => new FrameReader(1024).push(raw('{"id":1}', 99))).toThrow('frame head is longer than its frame');
    const oversized = Buffer.alloc(8);
    oversized.writeUInt32BE(1_000_000, 0);
    oversized.writeUInt32BE(MAX_HEAD_BYTES + 1, 4);
    expect(() => new FrameReader(1024).push(oversized)).toThrow(
      new WireFrameError(`frame head of ${MAX_HEAD_BYTES + 1} bytes is over the limit of ${MAX_HEAD_BYTES}`),
    );
  });
});
