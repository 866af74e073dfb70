// The value codec of JS RPC to another application (docs/bindings.md "Service bindings"): the
// structured-clonable values a call's arguments, result or thrown value may hold, written as JSON
// in which every array is a tagged tuple, so that nothing a worker sends is mistaken for a tag.
// It runs as JavaScript inside workerd (the caller's wrapped binding and the target's entry) and
// in Node's tests, from this one source. A value it cannot carry (a function, a stream, an RPC
// stub, a class instance, a cycle) is refused with a TypeError naming it and where it sits.

/** The name the codec has among a worker's modules and among the config's extension modules. */
export const SERVICE_CODEC_MODULE = 'cell-service-codec.js';
export const SERVICE_CODEC_INTERNAL_MODULE = 'cell-internal:service-codec';

export const SERVICE_CODEC_SOURCE = `const ERRORS = { Error, EvalError, RangeError, ReferenceError, SyntaxError, TypeError, URIError };
const VIEWS = { Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array,
  Uint32Array, Float32Array, Float64Array, BigInt64Array, BigUint64Array, DataView };
if (typeof Float16Array === 'function') VIEWS.Float16Array = Float16Array;

function toBase64(bytes) {
  let text = '';
  for (let i = 0; i < bytes.length; i += 0x8000)
    text += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  return btoa(text);
}

function fromBase64(text) {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

function describe(value) {
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'symbol') return 'a symbol';
  const name = Object.getPrototypeOf(value)?.constructor?.name;
  return name ? 'a ' + name : 'an object without a plain prototype';
}

function refuse(value, path, why) {
  return new TypeError('cannot send ' + (why ?? describe(value)) + ' (at ' + path + '): JS RPC to another ' +
    'application carries structured-clonable values only, no functions, streams or RPC stubs');
}

/** The JSON-safe form of \`value\`; \`path\` names where it sits, for a refusal. */
export function encodeValue(value, path = 'the value', ancestors = new Set()) {
  switch (typeof value) {
    case 'undefined': return ['u'];
    case 'boolean': case 'string': return value;
    case 'number':
      return Number.isFinite(value) && !Object.is(value, -0) ? value : ['n', Object.is(value, -0) ? '-0' : String(value)];
    case 'bigint': return ['b', value.toString()];
    case 'function': case 'symbol': throw refuse(value, path);
  }
  if (value === null) return null;
  if (ancestors.has(value)) throw refuse(value, path, 'a value that contains itself');
  ancestors.add(value);
  try {
    return encodeObject(value, path, ancestors);
  } finally {
    ancestors.delete(value);
  }
}

function encodeObject(value, path, ancestors) {
  const inner = (v, at) => encodeValue(v, at, ancestors);
  if (Array.isArray(value)) {
    const items = [];
    for (let i = 0; i < value.length; i++) items.push(inner(value[i], path + '[' + i + ']'));
    return ['a', items];
  }
  if (value instanceof Date) return ['d', inner(value.getTime(), path)];
  if (value instanceof RegExp) return ['r', value.source, value.flags];
  if (value instanceof Map) {
    const entries = [];
    for (const [k, v] of value) entries.push([inner(k, path + ' (a key)'), inner(v, path + '.get(...)')]);
    return ['m', entries];
  }
  if (value instanceof Set) return ['s', [...value].map((v) => inner(v, path + ' (an element)'))];
  if (value instanceof ArrayBuffer) return ['ab', toBase64(new Uint8Array(value))];
  if (ArrayBuffer.isView(value)) {
    const kind = Object.keys(VIEWS).find((k) => Object.getPrototypeOf(value) === VIEWS[k].prototype);
    if (!kind) throw refuse(value, path);
    return ['v', kind, toBase64(new Uint8Array(value.buffer, value.byteOffset, value.byteLength))];
  }
  if (value instanceof Error) {
    const name = Object.hasOwn(ERRORS, value.name) ? value.name : 'Error';
    const fields = { message: String(value.message) };
    if (typeof value.stack === 'string') fields.stack = value.stack;
    if (Object.hasOwn(value, 'cause')) fields.cause = inner(value.cause, path + '.cause');
    return ['e', name, fields];
  }
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) throw refuse(value, path);
  const entries = [];
  for (const key of Object.keys(value)) entries.push([key, inner(value[key], path + '.' + key)]);
  return ['o', entries];
}

/** The value \`encodeValue\` wrote; throws a TypeError on anything it could not have written. */
export function decodeValue(tree) {
  if (tree === null || typeof tree === 'boolean' || typeof tree === 'string' || typeof tree === 'number')
    return tree;
  if (!Array.isArray(tree)) throw new TypeError('not a value of the RPC codec');
  const [tag, a, b] = tree;
  switch (tag) {
    case 'u': return undefined;
    case 'n': return Number(a);
    case 'b': return BigInt(a);
    case 'a': return a.map(decodeValue);
    case 'd': return new Date(decodeValue(a));
    case 'r': return new RegExp(a, b);
    case 'm': return new Map(a.map(([k, v]) => [decodeValue(k), decodeValue(v)]));
    case 's': return new Set(a.map(decodeValue));
    case 'ab': return fromBase64(a).buffer;
    case 'v': {
      const View = VIEWS[a];
      if (!View) throw new TypeError('not a value of the RPC codec');
      return new View(fromBase64(b).buffer);
    }
    case 'e': {
      const Kind = Object.hasOwn(ERRORS, a) ? ERRORS[a] : Error;
      const error = Object.hasOwn(b, 'cause') ? new Kind(b.message, { cause: decodeValue(b.cause) }) : new Kind(b.message);
      if (typeof b.stack === 'string') error.stack = b.stack;
      return error;
    }
    case 'o': {
      const object = {};
      for (const [key, v] of a)
        Object.defineProperty(object, key, { value: decodeValue(v), enumerable: true, writable: true, configurable: true });
      return object;
    }
  }
  throw new TypeError('not a value of the RPC codec');
}
`;
