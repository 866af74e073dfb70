// The routing document as the node serves it (docs/ingress.md "The routing document";
// docs/routing-vectors.md): the generic document and the native formats, rendered once per reconcile pass and
// per `prefer`. No HTTP here: the routes that serve these bytes are src/node/routes/ingress.ts.

import type { Settings } from '../config/settings.ts';
import { Problem } from '../problem.ts';
import { renderProxybBytes } from '../routing/proxyb.ts';
import { renderRouting, resolvePrefer, serializeRouting } from '../routing/render.ts';
import type { FleetRouting, RoutingInput } from '../routing/types.ts';

/** Where the routes find the fleet state of the last reconcile pass; null until the first pass. */
export interface RoutingSource {
  current(): RoutingInput | null;
}

/** What rendering needs of the node: its id (for the refusal before the first pass) and settings. */
export interface RenderingNode {
  readonly nodeId: string;
  readonly settings: Settings;
}

/** How one format turns the routing document into served bytes. */
type Format = (doc: FleetRouting, preferNode: string | undefined, settings: Settings) => string;

/** The generic document (key '') and the native formats the node renders, by name. */
const renderers: Record<string, Format> = {
  '': (doc) => serializeRouting(doc),
  proxyb: (doc, preferNode, settings) =>
    renderProxybBytes(doc, { entryPoints: settings.ingress.entryPoints, preferNode }),
};

/** The native format names, as the unknown-format refusal lists them. */
export const ROUTING_FORMATS: readonly string[] = Object.keys(renderers).filter((f) => f !== '');

/** Distinct `prefer` values kept per pass; more only costs a render per request, never memory. */
const CACHED_RENDERINGS = 64;

/**
 * The bytes of the last pass's rendering, per format and `prefer`. Rendered once per pass and
 * kept: an unchanged fleet must give identical bytes (rendering is deterministic anyway), and a
 * poll every few seconds from every ingress should not redo the work.
 */
export class RenderedRouting {
  readonly #source: RoutingSource;
  readonly #node: RenderingNode;
  #input: RoutingInput | null = null;
  #bytes = new Map<string, string>();

  constructor(source: RoutingSource, node: RenderingNode) {
    this.#source = source;
    this.#node = node;
  }

  /** The served text; `format` '' is the generic document. Throws `draining` before the first pass. */
  bytes(format: string, prefer: string | undefined): string {
    const input = this.#source.current();
    if (!input) {
      throw new Problem(
        'draining',
        'Routing is not known yet',
        `node ${this.#node.nodeId} has not completed its first reconcile pass`,
      );
    }
    if (input !== this.#input) {
      this.#input = input;
      this.#bytes = new Map();
    }
    const key = `${format} ${prefer ?? ''}`;
    let text = this.#bytes.get(key);
    if (text === undefined) {
      const preferNode = resolvePrefer(prefer, input.selfNodeId);
      text = renderers[format](renderRouting(input, prefer), preferNode, this.#node.settings);
      if (this.#bytes.size < CACHED_RENDERINGS) this.#bytes.set(key, text);
    }
    return text;
  }
}

/**
 * The `prefer` query value: absent or empty is the fleet order; anything else is a node id or
 * `self`, taken verbatim. Given twice it means nothing the spec defines, so it is refused.
 */
export function preferFromQuery(query: unknown): string | undefined {
  const prefer = (query as Record<string, unknown> | undefined)?.prefer;
  if (prefer === undefined || typeof prefer === 'string') return prefer;
  throw new Problem('invalid-input', 'Malformed request', 'give prefer at most once: self or a node id');
}

/** A native format name from the path, checked: `not-found` names the formats this node renders. */
export function routingFormat(format: string): string {
  if (format !== '' && Object.hasOwn(renderers, format)) return format;
  throw new Problem(
    'not-found',
    'Unknown routing format',
    `this node renders: ${ROUTING_FORMATS.join(', ')}`,
  );
}
