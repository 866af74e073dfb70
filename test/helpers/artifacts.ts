// Deploy artifacts for tests: gzip-compressed tars built entry by entry (so a test can say
// anything a hostile client could), project directories, and the x-svc-deploy header.

import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { Header } from 'tar';

export interface RawEntry {
  path: string;
  type?: string;
  body?: string | Buffer;
  linkpath?: string;
}

/** A tar stream built block by block. */
export function tarBytes(entries: RawEntry[], options: { end?: boolean } = {}): Buffer {
  const blocks: Buffer[] = [];
  for (const entry of entries) {
    const body = entry.body === undefined ? Buffer.alloc(0) : Buffer.from(entry.body);
    const isFile = !entry.type || entry.type === 'File';
    const header = new Header({
      path: entry.path,
      type: (entry.type ?? 'File') as never,
      size: isFile ? body.length : 0,
      mode: 0o644,
      mtime: new Date(0),
      linkpath: entry.linkpath,
    });
    const block = Buffer.alloc(512);
    header.encode(block, 0);
    blocks.push(block);
    if (body.length > 0 && isFile) blocks.push(body, Buffer.alloc((512 - (body.length % 512)) % 512));
  }
  if (options.end !== false) blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}

export const tgz = (entries: RawEntry[]): Buffer => gzipSync(tarBytes(entries));

/** An artifact whose worker config steers the runtime stand-in (test/helpers/cell-standin.ts). */
export function standinArtifact(
  standin: { fail?: string; waitFor?: string; hang?: boolean } = {},
  extra: RawEntry[] = [],
): Buffer {
  return tgz([{ path: 'cell.json', body: JSON.stringify({ name: 'worker', standin }) }, ...extra]);
}

/** The canonical x-svc-deploy header of a document. */
export function metadataHeader(document: unknown): string {
  return Buffer.from(JSON.stringify(document), 'utf8').toString('base64url');
}

/** A project directory with the given files (path → content). */
export function projectDir(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'svc-project-'));
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), content);
  }
  return dir;
}
