// A real small disk for the full-disk tests: a tmpfs of a few MB mounted on a fresh directory
// (needs root, as the test machines run), filled to the last byte by one file and freed by
// removing it. Unmounted by `unmount`, which every test calls in its cleanup.

import { execFileSync } from 'node:child_process';
import { rmSync, statfsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from './svc.ts';

export interface SmallDisk {
  dir: string;
  /** Writes zeros until the disk refuses (ENOSPC); answers the bytes written. */
  fill(): number;
  /** Removes what `fill` wrote. */
  free(): void;
  /** Free bytes left (0 when full). */
  freeBytes(): number;
  unmount(): void;
}

/** Whether this process may mount a tmpfs (it runs as root). */
export const canMount = process.getuid?.() === 0;

export function mountSmallDisk(megabytes = 4): SmallDisk {
  const dir = tempDir('svc-small-disk-');
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${megabytes}m,mode=0700`, 'tmpfs', dir]);
  const filler = join(dir, 'filler');
  return {
    dir,
    fill() {
      let written = 0;
      const chunk = Buffer.alloc(64 * 1024);
      try {
        writeFileSync(filler, '');
        for (;;) {
          writeFileSync(filler, chunk, { flag: 'a' });
          written += chunk.length;
        }
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
      }
      // The last chunk may have landed in part: top up with single bytes until none fits.
      try {
        for (;;) {
          writeFileSync(filler, Buffer.alloc(1), { flag: 'a' });
          written += 1;
        }
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
      }
      return written;
    },
    free() {
      rmSync(filler, { force: true });
    },
    freeBytes() {
      const stats = statfsSync(dir);
      return stats.bavail * stats.bsize;
    },
    unmount() {
      execFileSync('umount', ['-l', dir]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
