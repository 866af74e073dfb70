// `DELETE … LIMIT` and `UPDATE … LIMIT` on a SQLite without them (docs/bindings.md "D1
// databases"): D1's SQLite is built with SQLITE_ENABLE_UPDATE_DELETE_LIMIT, and libraries use it
// (chanfana's delete endpoint sends `DELETE FROM t WHERE id = ? RETURNING * LIMIT 1`); Node's
// node:sqlite is built without it, and the option cannot be turned on at run time. Such a
// statement is rewritten to the same rows chosen by rowid:
//   DELETE FROM t WHERE c RETURNING r ORDER BY o LIMIT n
//   → DELETE FROM t WHERE rowid IN (SELECT rowid FROM t WHERE c ORDER BY o LIMIT n) RETURNING r
// Bare `?` parameters are numbered first (`?1`, `?2`, … as SQLite numbers them), so moving a
// clause does not change which value binds where. A table WITHOUT ROWID, `UPDATE … FROM`, or a
// statement this reading does not follow is left as it was, and SQLite refuses it as before.

interface Token {
  text: string;
  /** Parenthesis depth at the token. */
  depth: number;
  /** A word (keyword or name), upper-cased; otherwise null. */
  word: string | null;
}

/** The statement with its LIMIT moved into a rowid subquery, or the statement itself. */
export function rewriteLimitedWrite(sql: string): string {
  const tokens = tokenize(sql);
  const words = tokens.filter((t) => t.word !== null && t.depth === 0);
  const first = words[0]?.word;
  if (first !== 'DELETE' && first !== 'UPDATE') return sql;
  const limit = topLevel(tokens, 'LIMIT');
  if (limit < 0) return sql;
  const numbered = numberParameters(tokens);
  return (first === 'DELETE' ? rewriteDelete(numbered, limit) : rewriteUpdate(numbered, limit)) ?? sql;
}

function rewriteDelete(tokens: Token[], limit: number): string | null {
  const from = topLevel(tokens, 'FROM');
  if (from < 0) return null;
  const clauses = clauseStarts(tokens, from + 1);
  const table = text(tokens, from + 1, clauses.where ?? clauses.returning ?? clauses.order ?? limit);
  return assemble(`DELETE FROM ${table}`, table, tokens, clauses, limit);
}

function rewriteUpdate(tokens: Token[], limit: number): string | null {
  const set = topLevel(tokens, 'SET');
  if (set < 0 || topLevel(tokens, 'FROM') >= 0) return null;
  const update = tokens.findIndex((t) => t.word === 'UPDATE');
  let start = update + 1;
  // UPDATE OR <conflict> <table>
  if (tokens.slice(start).find((t) => t.word !== null)?.word === 'OR') {
    const or = tokens.findIndex((t, i) => i >= start && t.word === 'OR');
    start = tokens.findIndex((t, i) => i > or && t.word !== null) + 1;
  }
  const table = text(tokens, start, set);
  const clauses = clauseStarts(tokens, set + 1);
  const assignments = text(tokens, set + 1, clauses.where ?? clauses.returning ?? clauses.order ?? limit);
  const head = `${text(tokens, 0, start)} ${table} SET ${assignments}`;
  return assemble(head, table, tokens, clauses, limit);
}

interface Clauses {
  where?: number;
  returning?: number;
  order?: number;
}

function clauseStarts(tokens: Token[], from: number): Clauses {
  const at = (word: string) => {
    const i = tokens.findIndex((t, j) => j >= from && t.depth === 0 && t.word === word);
    return i < 0 ? undefined : i;
  };
  return { where: at('WHERE'), returning: at('RETURNING'), order: at('ORDER') };
}

function assemble(
  head: string,
  table: string,
  tokens: Token[],
  clauses: Clauses,
  limit: number,
): string | null {
  const ends = [clauses.where, clauses.returning, clauses.order, limit].filter(
    (i) => i !== undefined,
  ) as number[];
  const until = (start: number) => Math.min(...ends.filter((i) => i > start), tokens.length);
  const where = clauses.where === undefined ? '' : ` ${text(tokens, clauses.where, until(clauses.where))}`;
  const order = clauses.order === undefined ? '' : ` ${text(tokens, clauses.order, until(clauses.order))}`;
  const returning =
    clauses.returning === undefined ? '' : ` ${text(tokens, clauses.returning, until(clauses.returning))}`;
  const limited = text(tokens, limit, tokens.length).replace(/;\s*$/, '');
  const name = table.trim().split(/\s+/)[0];
  if (!name || /\bINDEXED\b/i.test(table)) return null;
  return `${head} WHERE rowid IN (SELECT rowid FROM ${name}${where}${order} ${limited})${returning}`;
}

function topLevel(tokens: Token[], word: string): number {
  return tokens.findIndex((t) => t.depth === 0 && t.word === word);
}

function text(tokens: Token[], from: number, to: number): string {
  return tokens
    .slice(from, to)
    .map((t) => t.text)
    .join('')
    .trim();
}

/** Bare `?` numbered as SQLite numbers them: one more than the largest number given so far. */
function numberParameters(tokens: Token[]): Token[] {
  let largest = 0;
  return tokens.map((t) => {
    if (t.text === '?') return { ...t, text: `?${++largest}` };
    const numbered = /^\?(\d+)$/.exec(t.text);
    if (numbered) largest = Math.max(largest, Number(numbered[1]));
    return t;
  });
}

/** Words, quoted strings and names, comments, parameters and single characters, in order. */
function tokenize(sql: string): Token[] {
  const tokens: Token[] = [];
  let depth = 0;
  const pattern =
    /('(?:[^']|'')*'|"(?:[^"]|"")*"|`(?:[^`]|``)*`|\[[^\]]*\]|--[^\n]*|\/\*[\s\S]*?\*\/|\?\d*|[A-Za-z_][A-Za-z0-9_$]*|\s+|.)/g;
  for (const match of sql.matchAll(pattern)) {
    const piece = match[0];
    if (piece === ')') depth--;
    tokens.push({ text: piece, depth, word: /^[A-Za-z_]/.test(piece) ? piece.toUpperCase() : null });
    if (piece === '(') depth++;
  }
  return tokens;
}
