// Preload for Node 20, whose fs lacks globSync (added in Node 22), which the
// MCP conformance suite's CLI imports by name:
//
//   node --import ./tools/shims/globsync.mjs node_modules/.bin/conformance …
//
// A --require preload cannot add a named export to the ESM view of a
// builtin, so this registers a resolve hook that hands every importer of
// fs a module re-exporting fs plus a small globSync. On Node 22 and later
// it does nothing.
import fs from 'node:fs';
import { register } from 'node:module';
import { isMainThread } from 'node:worker_threads';

const wrapper = new URL('./fs-with-globsync.mjs', import.meta.url).href;

if (isMainThread && typeof fs.globSync !== 'function') {
  register(import.meta.url);
}

// The resolve hook, run by the loader thread.
export async function resolve(specifier, context, next) {
  if ((specifier === 'fs' || specifier === 'node:fs') && context.parentURL !== wrapper) {
    return { url: wrapper, shortCircuit: true };
  }
  return next(specifier, context);
}
