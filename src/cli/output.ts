// CLI output rules of docs/cli.md "Exit behaviour": results on stdout, warnings on stderr,
// `SVC_SILENCE_WARNINGS=1` silences every warning.

/** Prints `svc: warning: <message>` on stderr unless warnings are silenced. */
export function warn(message: string): void {
  if (process.env.SVC_SILENCE_WARNINGS === '1') return;
  process.stderr.write(`svc: warning: ${message}\n`);
}

/** Prints one line on stdout. */
export function say(line: string): void {
  process.stdout.write(`${line}\n`);
}
