// node:fs with a globSync for Node 20 (see globsync.mjs). It supports what
// the conformance suite asks of it: patterns of path segments with *, ?
// and **, relative to options.cwd, answered as relative paths.
import fs from 'node:fs';
import path from 'node:path';

export * from 'node:fs';
export default fs;

function toRegExp(pattern) {
  let re = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '*' && pattern[i + 1] === '*') {
      i++;
      if (pattern[i + 1] === '/') {
        i++;
        re += '(?:.*/)?';
      } else {
        re += '.*';
      }
    } else if (c === '*') {
      re += '[^/]*';
    } else if (c === '?') {
      re += '[^/]';
    } else {
      re += c.replace(/[.+^${}()|[\]\\]/g, '\\$&');
    }
  }
  return new RegExp('^' + re + '$');
}

export function globSync(patterns, options = {}) {
  const cwd = options.cwd ? String(options.cwd) : process.cwd();
  const list = (Array.isArray(patterns) ? patterns : [patterns]).map(toRegExp);
  let entries;
  try {
    entries = fs.readdirSync(cwd, { recursive: true });
  } catch {
    return [];
  }
  return entries
    .map((e) => String(e).split(path.sep).join('/'))
    .filter((e) => list.some((re) => re.test(e)));
}
