#!/usr/bin/env node
// The repository's markdown links stay inside it and resolve: every relative link names a file
// or folder that exists under the repository root, and a link to `#anchor` (in the same file or
// another markdown file) names a heading there. A link with a scheme (`https:`, `mailto:`, ...),
// an absolute path, or a path that climbs out of the root is refused: the repository must read
// on its own, without the shared folder beside it or the web. Code blocks and code spans are
// not links. Run by `npm run check:links`; exits 1 with one line per problem.
import { existsSync, readdirSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { dirname, extname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Folders never walked: installed packages, build output, local cluster data. */
const SKIPPED = new Set(['node_modules', 'dist', '.git', '.tessera']);

/** Every `*.md` file under `root`, relative to it; symbolic links are not followed. */
export function markdownFiles(root, dir = root) {
  const found = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.isSymbolicLink() || SKIPPED.has(entry.name)) continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) found.push(...markdownFiles(root, path));
    else if (entry.isFile() && entry.name.endsWith('.md')) found.push(relative(root, path));
  }
  return found.sort();
}

/** The text of `markdown` with fenced code blocks and code spans blanked, line numbers kept. */
function withoutCode(markdown) {
  let fence;
  return markdown
    .split('\n')
    .map((line) => {
      const opening = /^\s{0,3}(`{3,}|~{3,})/.exec(line);
      if (fence === undefined && opening) {
        fence = opening[1][0].repeat(opening[1].length);
        return '';
      }
      if (fence !== undefined) {
        if (line.trim().startsWith(fence)) fence = undefined;
        return '';
      }
      return line.replace(/(`+)[^`]*?\1/g, '');
    })
    .join('\n');
}

/** Every link target in `markdown` with its 1-based line: inline links, images, reference definitions. */
export function linksOf(markdown) {
  const links = [];
  for (const [index, line] of withoutCode(markdown).split('\n').entries()) {
    for (const match of line.matchAll(/!?\[[^\]]*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+["'(][^)]*)?\)/g)) {
      links.push({ target: match[1].replace(/^<|>$/g, ''), line: index + 1 });
    }
    const definition = /^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)/.exec(line);
    if (definition) links.push({ target: definition[1].replace(/^<|>$/g, ''), line: index + 1 });
  }
  return links;
}

/** A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens. */
export function slugOf(heading) {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The anchors of `markdown`'s headings (a repeated heading gets `-1`, `-2`, ... as on GitHub). */
export function anchorsOf(markdown) {
  const anchors = new Set();
  const seen = new Map();
  for (const line of withoutCode(markdown.replace(/`/g, '')).split('\n')) {
    const heading = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const slug = slugOf(heading[1].replace(/\[([^\]]*)\]\([^)]*\)/g, '$1'));
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

/** The problems of one link of `file` (relative to `root`), as messages; none when it is good. */
function problemsOf(root, file, target) {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//')) {
    return ['links outside the repository (the repository must read on its own)'];
  }
  if (target.startsWith('/')) return ['is an absolute path: write it relative to the file'];
  const hash = target.indexOf('#');
  const pathPart = decodeURI(hash < 0 ? target : target.slice(0, hash));
  const anchor = hash < 0 ? undefined : decodeURIComponent(target.slice(hash + 1));
  const targetPath = pathPart === '' ? resolve(root, file) : resolve(root, dirname(file), pathPart);
  const fromRoot = relative(root, targetPath);
  if (fromRoot === '..' || fromRoot.startsWith(`..${sep}`)) return ['leaves the repository'];
  if (!existsSync(targetPath)) return [`names ${fromRoot}, which does not exist`];
  if (anchor === undefined || anchor === '') return [];
  if (statSync(targetPath).isDirectory() || extname(targetPath) !== '.md')
    return [`has an anchor into ${fromRoot}, which is not a markdown file`];
  if (!anchorsOf(readFileSync(targetPath, 'utf8')).has(anchor)) return [`names #${anchor}, which is no heading of ${fromRoot}`];
  return [];
}

/** Every broken or outgoing link in the markdown under `root`, one message each. */
export function checkLinks(root) {
  const problems = [];
  for (const file of markdownFiles(root)) {
    for (const { target, line } of linksOf(readFileSync(join(root, file), 'utf8'))) {
      for (const problem of problemsOf(root, file, target)) problems.push(`${file}:${line}: ${target} ${problem}`);
    }
  }
  return problems;
}

if (process.argv[1] !== undefined && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const root = process.argv[2] ?? fileURLToPath(new URL('..', import.meta.url));
  const problems = checkLinks(resolve(root));
  for (const problem of problems) console.error(problem);
  if (problems.length > 0) {
    console.error(`check:links: ${problems.length} link(s) to fix`);
    process.exit(1);
  }
}
