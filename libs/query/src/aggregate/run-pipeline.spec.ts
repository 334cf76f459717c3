import { describe, expect, it } from 'vitest';
import type { ValueObject } from '@tessera/core';
import { checkPipeline, runPipeline } from './run-pipeline.js';

const documents: ValueObject[] = [
  { _id: 1, c: 'a', x: 1 },
  { _id: 2, c: 'a', x: 2 },
  { _id: 3, c: 'b', x: 5 },
];

describe('scripts in pipelines', () => {
  it('runs $setWindowFields, whose outputs mingo computes through an internal $function', () => {
    const stages = checkPipeline([
      {
        $setWindowFields: {
          partitionBy: '$c',
          sortBy: { x: 1 },
          output: { running: { $sum: '$x', window: { documents: ['unbounded', 'current'] } } },
        },
      },
      { $sort: { _id: 1 } },
      { $project: { running: 1 } },
    ]);
    expect(runPipeline(documents, stages)).toEqual([
      { _id: 1, running: 1 },
      { _id: 2, running: 3 },
      { _id: 3, running: 5 },
    ]);
  });

  it('refuses a user script anywhere in a stage or in let, before anything runs', () => {
    const script = { body: 'function() { return 1 }', args: [], lang: 'js' };
    for (const pipeline of [
      [{ $project: { y: { $add: [1, { $function: script }] } } }],
      [{ $group: { _id: null, s: { $accumulator: { init: 'function() {}', accumulate: 'f', merge: 'f', lang: 'js' } } } }],
      [{ $match: { $where: 'true' } }],
      [{ $lookup: { from: 'o', as: 'j', pipeline: [{ $set: { z: { $function: script } } }] } }],
    ]) {
      const refused = expect.objectContaining({ code: 'BAD_VALUE', message: expect.stringContaining('no server-side JavaScript') });
      expect(() => checkPipeline(pipeline), JSON.stringify(pipeline)).toThrow(refused);
      expect(() => runPipeline(documents, pipeline as ValueObject[])).toThrow(refused);
    }
    expect(() => runPipeline(documents, [{ $set: { v: '$$v' } }], { variables: { v: { $function: script } } })).toThrow(
      expect.objectContaining({ message: expect.stringContaining('no server-side JavaScript') }),
    );
  });
});
