// Writing large JSON texts (docs/ingress.md routing document and proxyb) without keeping every piece alive.

// Collects the text in one buffer, kept from one rendering to the next: the pieces die young
// (keeping tens of thousands of small strings alive until one final join made garbage collection
// the largest cost), and neither fresh chunks nor a final concatenation of them cost memory that
// has to be mapped and collected on every render (see bench/RESULTS.md, Routing render).
// Rendering is synchronous, so one buffer per process is never written by two renderings at once.
// It grows to the largest text rendered (doubling from 1 MB: 16 MB for 10,000 applications on three
// nodes with `prefer`) and stays that size.
let scratch = Buffer.alloc(0);

export class TextSink {
  length = 0;
  chunk = '';
  /** Every character so far was ASCII, so the bytes decode as latin1, which is cheaper. */
  ascii = true;

  add(text: string): void {
    this.chunk += text;
    if (this.chunk.length >= 1 << 15) this.flush();
  }

  finish(): string {
    this.flush();
    return scratch.toString(this.ascii ? 'latin1' : 'utf8', 0, this.length);
  }

  private flush(): void {
    const size = Buffer.byteLength(this.chunk);
    if (size !== this.chunk.length) this.ascii = false;
    if (this.length + size > scratch.length) {
      const grown = Buffer.allocUnsafe(Math.max(2 * scratch.length, this.length + size, 1 << 20));
      scratch.copy(grown, 0, 0, this.length);
      scratch = grown;
    }
    this.length += scratch.write(this.chunk, this.length);
    this.chunk = '';
  }
}

/** `text` as it appears inside a JSON string; valid hosts and addresses come back unchanged. */
export function inner(text: string): string {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x20 || c === 0x22 || c === 0x5c || (c >= 0xd800 && c <= 0xdfff))
      return JSON.stringify(text).slice(1, -1);
  }
  return text;
}
