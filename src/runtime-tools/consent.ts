// The `[y/N]` consent rule shared by `svc deployment prune` and `svc app lease drop` (docs/cli.md
// "svc app" and prune rule 7): only `y` or `yes`, in any casing, consents; `--yes` answers
// ahead; input that is no terminal, without `--yes`, is refused since nothing can answer.

import { createInterface } from 'node:readline/promises';
import { Problem } from '../problem.ts';

/** Where an answer comes from: the terminal in the CLI, a script in tests. */
export interface Answerer {
  /** True when a person can answer (stdin is a terminal). */
  readonly interactive: boolean;
  ask(question: string): Promise<string>;
}

/** Asks on stderr (stdout carries results) and reads one line from stdin. */
export function terminalAnswerer(): Answerer {
  return {
    interactive: process.stdin.isTTY === true,
    async ask(question) {
      const rl = createInterface({ input: process.stdin, output: process.stderr, terminal: true });
      try {
        return await rl.question(question);
      } finally {
        rl.close();
      }
    },
  };
}

/** True for exactly `y` or `yes` in any casing (surrounding blanks aside). */
export function isConsent(answer: string): boolean {
  return /^(y|yes)$/i.test(answer.trim());
}

/** Answers whether to go ahead; refuses when nobody can be asked. */
export async function consent(
  question: string,
  options: { yes: boolean; answerer: Answerer },
): Promise<boolean> {
  if (options.yes) return true;
  if (!options.answerer.interactive) {
    throw new Problem(
      'invalid-input',
      'Nothing to answer with',
      'input is not a terminal, so nobody can answer the prompt; pass --yes to go ahead without asking',
    );
  }
  return isConsent(await options.answerer.ask(`${question} [y/N] `));
}
