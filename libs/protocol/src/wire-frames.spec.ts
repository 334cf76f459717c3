import { describe, expect, it, vi } from 'vitest';
import { FrameReader, WireFrameError, type WireRequestHead, encodeFrame } from './wire-frames.js';

const head = (id: number): WireRequestHead => ({ id, method: 'POST', path: '/internal/data/find', headers: { 'x-tessera-date': '1' } });

describe('wire frames', () => {
  it('reads back what was encoded, the body as the bytes sent (multi-byte characters too)', () => {
    const reader = new FrameReader<WireRequestHead>(1024);
    const [frame, ...rest] = reader.push(encodeFrame(head(1), '{"filter":{"k":"é€😀"}}'));
    expect(rest).toEqual([]);
    expect(frame!.head).toEqual(head(1));
    expect(frame!.body.toString('utf8')).toBe('{"filter":{"k":"é€😀"}}');
  });

  it('cuts frames out of a stream however it is chunked: several in one chunk, one over many', () => {
    const stream = Buffer.concat([encodeFrame(head(1), '{"a":1}'), encodeFrame(head(2), ''), encodeFrame(head(3), '"ü"'.repeat(50))]);
    for (const size of [1, 3, 7, 64, stream.length]) {
      const reader = new FrameReader<WireRequestHead>(1024);
      const frames = [];
      for (let at = 0; at < stream.length; at += size) frames.push(...reader.push(stream.subarray(at, at + size)));
      expect(frames.map((f) => [f.head.id, f.body.toString('utf8')])).toEqual([
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
    expect(frames.map((f) => f.body.toString('utf8') === body)).toEqual([true]);
  });

  it('refuses a frame over the limit as soon as its length is read, before its bytes arrive', () => {
    const reader = new FrameReader<WireRequestHead>(100);
    const frame = encodeFrame(head(1), 'x'.repeat(200));
    expect(() => reader.push(frame.subarray(0, 4))).toThrow(new WireFrameError(`frame of ${frame.length - 4} bytes is over the limit of 100`));
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
  });
});
