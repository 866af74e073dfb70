// Follows a log file another program appends to, line by line, by polling: it survives the file
// not existing yet, being rotated (renamed away and a new one created: the old file is read to its
// end before the new one is opened) and being truncated in place (read again from the start).
// At start an existing file is followed from its end, so a restart does not count old lines twice.

import { type FileHandle, open, stat } from 'node:fs/promises';
import { StringDecoder } from 'node:string_decoder';

const CHUNK_BYTES = 256 * 1024;
/** A "line" longer than this without a newline is dropped, so memory stays bounded. */
const MAX_PARTIAL_BYTES = 1 << 20;

export class LogFollower {
  readonly #path: string;
  readonly #onLine: (line: string) => void;
  #file: FileHandle | null = null;
  #ino = -1;
  #offset = 0;
  #partial = '';
  #decoder = new StringDecoder('utf8');
  #first = true;

  constructor(path: string, onLine: (line: string) => void) {
    this.#path = path;
    this.#onLine = onLine;
  }

  #polling: Promise<void> = Promise.resolve();

  /** Reads what was appended since the last poll; never throws for a missing or unreadable file. */
  poll(): Promise<void> {
    this.#polling = this.#polling.then(() => this.#poll());
    return this.#polling;
  }

  async #poll(): Promise<void> {
    if (!this.#file) {
      if (!(await this.#open())) return;
    }
    await this.#drain();
    let now: { ino: number; size: number } | null = null;
    try {
      now = await stat(this.#path);
    } catch {
      // Renamed away and not created again yet: keep the old file open, it may still grow.
      return;
    }
    if (now.ino !== this.#ino) {
      // Rotated: the old file is read to its very end (lines may have landed since the drain
      // above, before the writer moved on), then the new one from its start.
      await this.#drain();
      await this.#close();
      if (await this.#open()) await this.#drain();
    } else if (now.size < this.#offset) {
      // Truncated in place.
      this.#offset = 0;
      this.#partial = '';
      this.#decoder = new StringDecoder('utf8');
      await this.#drain();
    }
  }

  async close(): Promise<void> {
    await this.#polling;
    await this.#close();
  }

  async #open(): Promise<boolean> {
    try {
      const file = await open(this.#path, 'r');
      const info = await file.stat();
      this.#file = file;
      this.#ino = info.ino;
      this.#offset = this.#first ? info.size : 0;
      this.#partial = '';
      this.#decoder = new StringDecoder('utf8');
      this.#first = false;
      return true;
    } catch {
      // Not there yet: whatever appears later is new and is read from its start.
      this.#first = false;
      return false;
    }
  }

  async #close(): Promise<void> {
    const file = this.#file;
    this.#file = null;
    await file?.close().catch(() => {});
  }

  async #drain(): Promise<void> {
    const file = this.#file;
    if (!file) return;
    const buffer = Buffer.allocUnsafe(CHUNK_BYTES);
    for (;;) {
      let bytesRead: number;
      try {
        ({ bytesRead } = await file.read(buffer, 0, CHUNK_BYTES, this.#offset));
      } catch {
        return;
      }
      if (bytesRead === 0) return;
      this.#offset += bytesRead;
      this.#take(this.#decoder.write(buffer.subarray(0, bytesRead)));
    }
  }

  #take(text: string): void {
    const lines = (this.#partial + text).split('\n');
    this.#partial = lines.pop() ?? '';
    if (this.#partial.length > MAX_PARTIAL_BYTES) this.#partial = '';
    for (const line of lines) if (line !== '') this.#onLine(line);
  }
}
