// A strict reader of the Prometheus text exposition format (version 0.0.4), for tests: every line
// is a `# HELP`, a `# TYPE` or a sample; names and labels follow the format's grammar; each
// family's TYPE comes before its samples and a family is not split. It throws on anything else,
// so a test that parses a scrape also checks its syntax.

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  type: 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';
  help: string;
  samples: Sample[];
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\["\\n])*)"\s*(,|$)/y;
const SUFFIXES: Record<Family['type'], string[]> = {
  counter: [''],
  gauge: [''],
  untyped: [''],
  histogram: ['_bucket', '_sum', '_count'],
  summary: ['', '_sum', '_count'],
};

export function parseExposition(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  let current: Family | null = null;
  if (text !== '' && !text.endsWith('\n')) throw new Error('the exposition does not end with a newline');
  const lines = text.split('\n').slice(0, -1);
  for (const [i, line] of lines.entries()) {
    const fail = (why: string) => new Error(`line ${i + 1}: ${why}: ${JSON.stringify(line)}`);
    const meta = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
    if (meta) {
      const [, what, name, rest] = meta as unknown as [string, string, string, string];
      if (!NAME.test(name)) throw fail('invalid metric name');
      let family = families.get(name);
      if (family && family !== current) throw fail('family split');
      if (!family) {
        family = { name, type: 'untyped', help: '', samples: [] };
        families.set(name, family);
      }
      current = family;
      if (what === 'HELP') family.help = rest;
      else if (!(rest in SUFFIXES) || family.samples.length > 0) throw fail('invalid or late TYPE');
      else family.type = rest as Family['type'];
      continue;
    }
    if (line.startsWith('#') || line.trim() === '') continue;
    const sample = parseSample(line, fail);
    if (!current || !SUFFIXES[current.type].some((s) => sample.name === current!.name + s))
      throw fail('sample outside its family');
    current.samples.push(sample);
  }
  return families;
}

function parseSample(line: string, fail: (why: string) => Error): Sample {
  const head = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? (\S+)( -?\d+)?$/.exec(line);
  if (!head) throw fail('not a sample');
  const labels: Record<string, string> = {};
  const body = head[3] ?? '';
  LABEL.lastIndex = 0;
  while (LABEL.lastIndex < body.length) {
    const at = LABEL.lastIndex;
    const match = LABEL.exec(body);
    if (!match || match.index !== at) throw fail('invalid labels');
    if (match[1]! in labels) throw fail('repeated label');
    labels[match[1]!] = match[2]!.replace(/\\(["\\n])/g, (_, c) => (c === 'n' ? '\n' : c));
  }
  // As Prometheus reads values (Go's ParseFloat): NaN and Inf in any case; prom-client writes `Nan`.
  const raw = head[4]!.toLowerCase();
  const value = raw === '+inf' || raw === 'inf' ? Infinity : raw === '-inf' ? -Infinity : Number(raw);
  if (Number.isNaN(value) && raw !== 'nan') throw fail('invalid value');
  return { name: head[1]!, labels, value };
}

/** The samples of a family named `name` (with a suffix: `_bucket`...) whose labels include `labels`. */
export function samplesOf(
  families: Map<string, Family>,
  family: string,
  name = family,
  labels: Record<string, string> = {},
): Sample[] {
  return (families.get(family)?.samples ?? []).filter(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
}

/** The one value of a series; throws when there is none or more than one. */
export function seriesValue(
  families: Map<string, Family>,
  family: string,
  labels: Record<string, string> = {},
  name = family,
): number {
  const found = samplesOf(families, family, name, labels);
  if (found.length !== 1)
    throw new Error(`${found.length} samples of ${name} with ${JSON.stringify(labels)}`);
  return found[0]!.value;
}
