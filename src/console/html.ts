// HTML text for the console's server-rendered pages (docs/console.md "How it is built"): every
// value interpolated into a template is escaped unless it is itself built by `html`, so data from
// the fleet (names, labels, event fields, a refusal's detail) can never become markup.

/** Markup that is already escaped. */
export class Html {
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }
  toString(): string {
    return this.text;
  }
}

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

function render(value: unknown): string {
  if (value instanceof Html) return value.text;
  if (Array.isArray(value)) return value.map(render).join('');
  if (value === null || value === undefined || value === false) return '';
  return escapeHtml(String(value));
}

/** A template of markup: strings as written, values escaped (arrays joined, nullish left out). */
export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0]!;
  values.forEach((value, i) => {
    out += render(value) + strings[i + 1]!;
  });
  return new Html(out);
}

/** JSON for a `<script type="application/json">` block: `<` escaped so no text can close it. */
export function jsonBlock(value: unknown): Html {
  return new Html(JSON.stringify(value).replace(/</g, '\\u003c'));
}
