// The upload progress of `svc deploy`: one stderr line rewritten in place while the artifact is
// sent, on a terminal only, so logs and pipes get no carriage returns.

import { formatBytes } from './output.ts';

/** How often the line is redrawn at most. */
const REDRAW_EVERY_MS = 100;

/** Upload progress: a line rewritten in place on a TTY, nothing otherwise. */
export class UploadMeter {
  readonly #total: number;
  readonly #tty = process.stderr.isTTY === true;
  #sent = 0;
  #last = 0;
  #shown = false;

  constructor(total: number) {
    this.#total = total;
  }

  add(bytes: number): void {
    this.#sent += bytes;
    if (!this.#tty) return;
    const now = Date.now();
    if (now - this.#last < REDRAW_EVERY_MS && this.#sent < this.#total) return;
    this.#last = now;
    const percent = this.#total ? Math.floor((this.#sent / this.#total) * 100) : 100;
    process.stderr.write(
      `\rsvc: uploading ${formatBytes(this.#sent)} / ${formatBytes(this.#total)} (${percent}%)`,
    );
    this.#shown = true;
  }

  /** Ends the line the meter drew, if it drew one. */
  stop(): void {
    if (this.#shown) process.stderr.write('\n');
    this.#shown = false;
  }
}
