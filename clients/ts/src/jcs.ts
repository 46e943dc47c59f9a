/**
 * RFC 8785 JSON Canonicalization Scheme (JCS): the canonical bytes the shared test vectors pin.
 *
 * Numbers and strings serialise exactly as ECMAScript's JSON.stringify does (the RFC defines them that way);
 * object members are sorted by their names' UTF-16 code units, which is what Array.prototype.sort compares.
 */

export function canonicalize(value: unknown): string {
  if (value === null || typeof value === "boolean" || typeof value === "string") {
    return JSON.stringify(value);
  }
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new TypeError(`JCS has no form for ${value}`);
    return JSON.stringify(value); // -0 is "0", 1e21 is "1e+21", as the RFC requires
  }
  if (Array.isArray(value)) {
    return `[${value.map((item) => canonicalize(item === undefined ? null : item)).join(",")}]`;
  }
  if (typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalize(v)}`).join(",")}}`;
  }
  throw new TypeError(`JCS has no form for a ${typeof value}`);
}

/** The canonical form as UTF-8 bytes. */
export function canonicalBytes(value: unknown): Uint8Array {
  return new TextEncoder().encode(canonicalize(value));
}
