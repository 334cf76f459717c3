import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain ES module without types, run by npm run check:links.
import { checkLinks, slugOf } from './check-links.mjs';

const script = new URL('./check-links.mjs', import.meta.url).pathname;
const trees: string[] = [];

/** A repository root holding `files`, inside a parent folder that holds `outside.md`. */
function tree(files: Record<string, string>): string {
  const parent = mkdtempSync(join(tmpdir(), 'tessera-links-'));
  trees.push(parent);
  writeFileSync(join(parent, 'outside.md'), '# Outside\n');
  const root = join(parent, 'repo');
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

const check = (files: Record<string, string>) => (checkLinks as (root: string) => string[])(tree(files));

afterEach(() => {
  for (const tree of trees.splice(0)) rmSync(tree, { recursive: true, force: true });
});

describe('the markdown link check', () => {
  it('accepts links to files, folders and headings that exist', () => {
    const problems = check({
      'README.md':
        '# Tessera\n\nSee [the docs](docs/guide.md#the-benchcrud-table), [code](apps/a.ts), [a folder](apps) and [up](#tessera).\n',
      'docs/guide.md': '# Guide\n\n## The `bench:crud` table\n\nBack to the [README](../README.md).\n',
      'apps/a.ts': 'export {};\n',
    });
    expect(problems).toEqual([]);
  });

  it('reports a link to a file that does not exist, with its file and line', () => {
    const problems = check({ 'README.md': '# Tessera\n\nRead [this](docs/missing.md).\n' });
    expect(problems).toEqual(['README.md:3: docs/missing.md names docs/missing.md, which does not exist']);
  });

  it('reports an anchor that is no heading of the file it names', () => {
    const problems = check({
      'README.md': '[a](docs/guide.md#configuration) [b](#nowhere)\n',
      'docs/guide.md': '# Guide\n',
    });
    expect(problems).toHaveLength(2);
    expect(problems[0]).toContain('#configuration, which is no heading of docs/guide.md');
    expect(problems[1]).toContain('#nowhere, which is no heading of README.md');
  });

  it('refuses links that leave the repository, even to a file that exists', () => {
    const problems = check({ 'docs/a.md': '[the shared notes](../../outside.md) [root](/README.md)\n', 'README.md': '# R\n' });
    expect(problems).toEqual([
      'docs/a.md:1: ../../outside.md leaves the repository',
      'docs/a.md:1: /README.md is an absolute path: write it relative to the file',
    ]);
  });

  it('refuses web and other scheme links, in inline links and reference definitions', () => {
    const problems = check({
      'README.md': '[MongoDB](https://www.mongodb.com/docs/)\n\n[ref]: http://example.com\n[mail](mailto:a@b.c)\n',
    });
    expect(problems).toHaveLength(3);
    for (const problem of problems) expect(problem).toContain('links outside the repository');
  });

  it('ignores links in code blocks and code spans, and markdown under node_modules', () => {
    const root = tree({
      'README.md': '# R\n\n```md\n[x](missing.md)\n```\n\nInline: `[y](missing.md)`.\n',
      'node_modules/pkg/README.md': '[z](https://example.com)\n',
    });
    expect((checkLinks as (root: string) => string[])(root)).toEqual([]);
  });

  it('does not follow a symbolic link out of the repository', () => {
    const root = tree({ 'README.md': '# R\n' });
    mkdirSync(join(root, '..', 'elsewhere'));
    writeFileSync(join(root, '..', 'elsewhere', 'bad.md'), '[x](nowhere.md)\n');
    symlinkSync(join(root, '..', 'elsewhere'), join(root, 'linked'));
    expect((checkLinks as (root: string) => string[])(root)).toEqual([]);
  });

  it('makes anchors as GitHub does', () => {
    expect(slugOf('Load tests (k6)')).toBe('load-tests-k6');
    expect(slugOf('bench:crud')).toBe('benchcrud');
    expect(slugOf('The internal wire against HTTP')).toBe('the-internal-wire-against-http');
  });

  it('as a script, exits 1 and names each broken link', () => {
    const root = tree({ 'README.md': '[gone](docs/gone.md)\n' });
    const run = spawnSync(process.execPath, [script, root], { encoding: 'utf8' });
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('README.md:1: docs/gone.md names docs/gone.md, which does not exist');
  });

  it('as a script, passes on this repository', () => {
    const run = spawnSync(process.execPath, [script], { encoding: 'utf8' });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
  });
});
