// Writing large JSON texts (docs/ingress.md routing document and proxyb) without keeping every piece alive.

// Collects the text in fixed-size buffers so that the pieces die young: keeping tens of thousands
// of small strings alive until one final join made garbage collection the largest cost.
export class TextSink {
  static readonly SIZE = 1 << 20;
  full: Buffer[] = [];
  buffer = Buffer.allocUnsafe(TextSink.SIZE);
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
    const encoding = this.ascii ? 'latin1' : 'utf8';
    if (this.full.length === 0) return this.buffer.toString(encoding, 0, this.length);
    return Buffer.concat([...this.full, this.buffer.subarray(0, this.length)]).toString(encoding);
  }

  // A chunk never straddles two buffers, so no UTF-8 sequence is ever cut in half.
  private flush(): void {
    const size = Buffer.byteLength(this.chunk);
    if (size !== this.chunk.length) this.ascii = false;
    if (this.length + size > this.buffer.length) {
      this.full.push(this.buffer.subarray(0, this.length));
      this.buffer = Buffer.allocUnsafe(Math.max(size, TextSink.SIZE));
      this.length = 0;
    }
    this.length += this.buffer.write(this.chunk, this.length);
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
