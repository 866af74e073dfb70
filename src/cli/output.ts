// CLI output rules of docs/cli.md "Output and exit status": results on stdout, warnings and notes on
// stderr, `SVC_SILENCE_WARNINGS=1` silences every warning (never a note). Also the one way the
// CLI lays out a table and writes a byte count.

/** Prints `svc: warning: <message>` on stderr unless warnings are silenced. */
export function warn(message: string): void {
  if (process.env.SVC_SILENCE_WARNINGS === '1') return;
  process.stderr.write(`svc: warning: ${message}\n`);
}

/** Prints one line on stdout. */
export function say(line: string): void {
  process.stdout.write(`${line}\n`);
}

/**
 * Prints a note on stderr: what a command is doing or did besides its result (progress, files
 * written, what to do next). Never silenced: it is no warning.
 */
export function note(line: string): void {
  process.stderr.write(`${line}\n`);
}

/**
 * A table as lines: left-aligned columns two spaces apart, the last column unpadded, so a line
 * never ends in blanks.
 */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string[] {
  const widths = header.map((title, i) =>
    Math.max(title.length, ...rows.map((row) => (row[i] ?? '').length)),
  );
  return [header, ...rows].map((row) =>
    row
      .map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd(),
  );
}

/** A byte count for people: B below 1 KiB, then KiB and MiB with one decimal. */
export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}
