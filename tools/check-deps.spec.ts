import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

const script = new URL('./check-deps.mjs', import.meta.url).pathname;
const trees: string[] = [];

function checkTree(files: Record<string, string>): { status: number | null; output: string } {
  const tree = mkdtempSync(join(tmpdir(), 'tessera-deps-'));
  trees.push(tree);
  mkdirSync(join(tree, 'apps'));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(tree, path)), { recursive: true });
    writeFileSync(join(tree, path), text);
  }
  const run = spawnSync(process.execPath, [script, tree], { encoding: 'utf8' });
  return { status: run.status, output: run.stdout + run.stderr };
}

afterEach(() => {
  for (const tree of trees.splice(0)) rmSync(tree, { recursive: true, force: true });
});

describe('the dependency rule check', () => {
  it('accepts a pure core that imports itself and bson', () => {
    const result = checkTree({
      'libs/core/src/a.ts': "import { b } from './b.js';\nimport { EJSON } from 'bson';\n",
      'libs/core/src/b.ts': 'export const b = 1;\n',
    });
    expect(result.status).toBe(0);
  });

  it.each([
    ["import { Injectable } from '@nestjs/common';", 'may not import "@nestjs/common"'],
    ["import { DataSource } from 'typeorm';", 'may not import "typeorm"'],
    ["import { readFileSync } from 'node:fs';", 'may not import "node:fs"'],
    ['export const port = process.env.PORT;', 'reads process.env'],
    ['export const now = () => Date.now();', 'reads the clock'],
    ['export const roll = () => Math.random();', 'uses Math.random'],
  ])('refuses core code with %s', (line, message) => {
    const result = checkTree({ 'libs/core/src/bad.ts': `${line}\n` });
    expect(result.status).toBe(1);
    expect(result.output).toContain('libs/core/src/bad.ts:1');
    expect(result.output).toContain(message);
  });

  it("keeps the k6 workloads' shared modules free of k6, Node and ambient randomness, and lets the scripts import k6", () => {
    expect(
      checkTree({
        'loadtests/lib/keys.ts': "import { buildDocument } from './documents.ts';\n",
        'loadtests/lib/documents.ts': 'export const buildDocument = 1;\n',
        'loadtests/insert.ts':
          "import http from 'k6/http';\nimport exec from 'k6/execution';\nimport { buildDocument } from './lib/keys.ts';\n",
      }).status,
    ).toBe(0);
    for (const [line, message] of [
      ["import http from 'k6/http';", 'loadtests/lib/ may not import "k6/http"'],
      ["import { readFileSync } from 'node:fs';", 'loadtests/lib/ may not import "node:fs"'],
      ['export const roll = () => Math.random();', 'uses Math.random'],
      ["import { send } from '../support/k6-driver.ts';", 'leaves loadtests/lib/'],
    ]) {
      const result = checkTree({ 'loadtests/lib/bad.ts': `${line}\n` });
      expect(result.status).toBe(1);
      expect(result.output).toContain(message);
    }
    expect(checkTree({ 'loadtests/bad.ts': "import pg from 'pg';\n" }).output).toContain('loadtests/ may not import "pg"');
  });

  it('refuses a router that reaches into the config server by relative path', () => {
    const result = checkTree({ 'apps/router/src/a.ts': "import { x } from '../../config/src/x.js';\n" });
    expect(result.status).toBe(1);
    expect(result.output).toContain('leaves apps/router/');
  });

  it('lets a spec use the shared test fixtures, but not production code', () => {
    const fixture = "import { createTestDatabase } from '../../../../test/pg/test-database.js';\n";
    expect(checkTree({ 'apps/config/src/locks/a.pg.spec.ts': fixture }).status).toBe(0);
    const result = checkTree({ 'apps/config/src/locks/a.ts': fixture });
    expect(result.status).toBe(1);
    expect(result.output).toContain('leaves apps/config/');
  });

  it('refuses deep imports into a lib', () => {
    const result = checkTree({ 'apps/shard/src/a.ts': "import { x } from '@tessera/core/src/x.js';\n" });
    expect(result.status).toBe(1);
    expect(result.output).toContain('apps/shard/src/a.ts:1: apps/ may not import "@tessera/core/src/x.js"');
  });
});
