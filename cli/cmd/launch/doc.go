// Package launch holds the commands that chain operations to put a site
// or an app online and take it out again: `pier launch` (upload, quote,
// launch and wait until it serves), `pier bundles upload` (the digest
// upload, which sends only the content the server lacks and keeps a local
// cache of digests) and `pier export` (a project's leave package,
// verified).
package launch
