/**
 * Checks on core as a whole: every exported declaration and every public method of an exported
 * class carries a doc comment, and core's non-test files import only `bson` and themselves.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const here = fileURLToPath(new URL('.', import.meta.url));

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return name.endsWith('.ts') && !name.endsWith('.spec.ts') ? [path] : [];
  });
}

const files = sourceFiles(here).map((path) => ({ name: relative(here, path), lines: readFileSync(path, 'utf8').split('\n') }));

function precededByDocComment(lines: string[], index: number): boolean {
  for (let i = index - 1; i >= 0; i--) {
    const line = (lines[i] as string).trim();
    if (line === '' || line.startsWith('@')) continue;
    return line.endsWith('*/');
  }
  return false;
}

describe('core public API', () => {
  it('documents every exported declaration', () => {
    const missing: string[] = [];
    for (const { name, lines } of files) {
      lines.forEach((line, i) => {
        if (/^export (async )?(function|class|const|interface|type|abstract class) /.test(line) && !precededByDocComment(lines, i))
          missing.push(`${name}:${i + 1}: ${line.trim()}`);
      });
    }
    expect(missing).toEqual([]);
  });

  it('documents every public method and getter of exported classes', () => {
    const missing: string[] = [];
    let checked = 0;
    for (const { name, lines } of files) {
      let inExportedClass = false;
      lines.forEach((line, i) => {
        if (/^export (abstract )?class /.test(line)) inExportedClass = true;
        else if (/^}/.test(line)) inExportedClass = false;
        else if (
          inExportedClass &&
          /^ {2}(static |get |readonly |\*)*[A-Za-z][A-Za-z0-9]*(<[^>]*>)?\(/.test(line) &&
          !/^ {2}(private|protected) /.test(line)
        ) {
          checked++;
          if (!precededByDocComment(lines, i)) missing.push(`${name}:${i + 1}: ${line.trim()}`);
        }
      });
    }
    expect(checked).toBeGreaterThan(15);
    expect(missing).toEqual([]);
  });

  it('imports nothing but bson and files inside core', () => {
    const outside: string[] = [];
    for (const { name, lines } of files) {
      lines.forEach((line, i) => {
        const match = /^(?:import|export)\s.*from\s+'([^']+)'/.exec(line);
        if (match && match[1] !== 'bson' && !(match[1] as string).startsWith('.')) outside.push(`${name}:${i + 1}: ${match[1]}`);
      });
    }
    expect(outside).toEqual([]);
  });
});
