/**
 * The wire contract in TypeScript: every published JSON Schema (copied into the package by `npm run sync`), compiled
 * with Ajv (2020-12, formats asserted), typed decoding, and the normal form whose RFC 8785 bytes the vectors pin.
 */
import { readFileSync } from "node:fs";
import { Ajv2020, type ErrorObject, type ValidateFunction } from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";
import type { Payloads, SchemaName } from "./generated/index.js";
import { canonicalBytes } from "./jcs.js";

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Schema = { [keyword: string]: unknown };

const SCHEMAS_DIR = new URL("../schemas/", import.meta.url);
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

export type ContractReason = "invalid_json" | "unknown_schema" | "invalid_fields" | "unknown_payload";

/** A payload that does not match the contract; `reason` uses the worker's dead-letter reasons. */
export class ContractError extends Error {
  constructor(readonly reason: ContractReason, readonly problems: string[]) {
    super(`${reason}: ${problems.join("; ")}`);
    this.name = "ContractError";
  }
}

interface IndexEntry { name: SchemaName; id: string; file: string; title: string; tag: string | null }

const index: IndexEntry[] = (JSON.parse(readFileSync(new URL("index.json", SCHEMAS_DIR), "utf8")) as {
  schemas: IndexEntry[];
}).schemas;
const schemas = new Map<string, Schema>(
  index.map((e) => [e.name, JSON.parse(readFileSync(new URL(e.file, SCHEMAS_DIR), "utf8")) as Schema]));
const ajv = addFormats(new Ajv2020({ strict: true, strictTypes: false, allErrors: true }));
const validators = new Map<string, ValidateFunction>();

/** Every published schema name (`om.message/v1`, `data-om-status/v1`, ...). */
export const SCHEMA_NAMES: readonly SchemaName[] = index.map((e) => e.name);

function entry(name: string): IndexEntry {
  const found = index.find((e) => e.name === name);
  if (found === undefined) throw new ContractError("unknown_payload", [`no schema named ${name}`]);
  return found;
}

/** The JSON Schema of `name`, as published. */
export function schemaOf(name: SchemaName): Schema {
  entry(name);
  return schemas.get(name) as Schema;
}

function validator(name: SchemaName): ValidateFunction {
  let validate = validators.get(name);
  if (validate === undefined) {
    validate = ajv.compile(schemaOf(name));
    validators.set(name, validate);
  }
  return validate;
}

function describe(errors: ErrorObject[] | null | undefined): string[] {
  return (errors ?? []).slice(0, 10).map((e) => `${e.instancePath || "/"}: ${e.message ?? e.keyword}`);
}

/** Validate a parsed value against `name`; throws ContractError. */
export function validate<K extends SchemaName>(name: K, value: unknown): Payloads[K] {
  const tag = entry(name).tag;
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new ContractError("invalid_json", ["a payload is a JSON object"]);
  }
  if (tag !== null && (value as Record<string, unknown>)["schema"] !== tag) {
    throw new ContractError("unknown_schema", [`schema ${JSON.stringify((value as Record<string, unknown>)["schema"])} is not ${tag}`]);
  }
  const check = validator(name);
  if (!check(value)) throw new ContractError("invalid_fields", describe(check.errors));
  return value as Payloads[K];
}

/** Parse and validate one payload (a record value or an HTTP body). */
export function decode<K extends SchemaName>(name: K, raw: string | Uint8Array): Payloads[K] {
  let value: unknown;
  try {
    value = JSON.parse(typeof raw === "string" ? raw : new TextDecoder("utf-8", { fatal: true }).decode(raw));
  } catch (error) {
    throw new ContractError("invalid_json", [String(error)]);
  }
  return validate(name, value);
}

// -- the normal form -------------------------------------------------------------------------------------------------

function resolve(root: Schema, node: Schema): Schema {
  const ref = node["$ref"];
  if (typeof ref !== "string") return node;
  let target: unknown = root;
  for (const step of ref.replace(/^#\//, "").split("/")) target = (target as Schema)[step];
  const { $ref: _ignored, ...siblings } = node;
  return { ...(target as Schema), ...siblings };
}

function jsonType(value: Json): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value;
}

function accepts(branch: Schema, type: string): boolean {
  const declared = branch["type"];
  if (declared === undefined) return true;
  const types = Array.isArray(declared) ? (declared as string[]) : [declared as string];
  return types.includes(type) || (type === "integer" && types.includes("number"));
}

/** The branch of an anyOf/oneOf that a (valid) value takes: by JSON type, then by a `const` tag. */
function branchFor(root: Schema, branches: Schema[], value: Json): Schema | undefined {
  const candidates = branches.map((b) => resolve(root, b)).filter((b) => accepts(b, jsonType(value)));
  if (candidates.length <= 1 || jsonType(value) !== "object") return candidates[0];
  const object = value as Record<string, Json>;
  return candidates.find((b) => Object.entries((b["properties"] ?? {}) as Record<string, Schema>)
    .some(([name, prop]) => "const" in prop && object[name] === prop["const"])) ?? candidates[0];
}

const RFC3339 = /^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})?$/;

/** `created_at` as om-stream writes it: six fraction digits (none when zero), `Z` for UTC. */
export function normalDateTime(text: string): string {
  const match = RFC3339.exec(text);
  if (match === null) return text;
  const [, date, time, fraction = "", offset = "Z"] = match;
  const micros = fraction.slice(0, 6).padEnd(6, "0");
  const zone = /^(?:[Zz]|[+-]00:00)$/.test(offset) ? "Z" : offset;
  return `${date}T${time}${/^0+$/.test(micros) ? "" : `.${micros}`}${zone}`;
}

function normalizeNode(root: Schema, node: Schema, value: Json): Json {
  const schema = resolve(root, node);
  if (value === null) return null;
  const union = (schema["anyOf"] ?? schema["oneOf"]) as Schema[] | undefined;
  if (union !== undefined && schema["properties"] === undefined) {
    const branch = branchFor(root, union, value);
    return branch === undefined ? value : normalizeNode(root, branch, value);
  }
  if (Array.isArray(value)) {
    const prefix = schema["prefixItems"] as Schema[] | undefined;
    const items = schema["items"] as Schema | undefined;
    return value.map((item, i) => {
      const itemSchema = prefix?.[i] ?? items;
      return itemSchema === undefined ? item : normalizeNode(root, itemSchema, item);
    });
  }
  if (typeof value === "object") {
    const properties = schema["properties"] as Record<string, Schema> | undefined;
    if (properties === undefined) return value; // free-form data (metadata, tool args): kept as sent
    const required = new Set((schema["required"] ?? []) as string[]);
    const out: Record<string, Json> = {};
    for (const [name, item] of Object.entries(value)) {
      const prop = properties[name];
      if (item === null && prop !== undefined && !required.has(name)) continue; // optional and null: left out
      out[name] = prop === undefined ? item : normalizeNode(root, prop, item);
    }
    for (const [name, prop] of Object.entries(properties)) {
      const fallback = prop["default"] as Json | undefined;
      if (!(name in value) && fallback !== undefined && fallback !== null) {
        out[name] = normalizeNode(root, prop, structuredClone(fallback));
      }
    }
    return out;
  }
  if (typeof value === "string" && schema["format"] === "date-time") return normalDateTime(value);
  return value;
}

/**
 * The normal form of a payload: defaults written out, optional fields that are null left out, required fields kept
 * even when null, `created_at` normalised. Its RFC 8785 bytes are the payload's canonical bytes.
 */
export function normalize<K extends SchemaName>(name: K, value: Payloads[K]): Payloads[K] {
  const root = schemaOf(name);
  return normalizeNode(root, root, value as unknown as Json) as unknown as Payloads[K];
}

/** RFC 8785 bytes of the payload's normal form: what every client writes for the same typed value. */
export function encodeCanonical<K extends SchemaName>(name: K, value: Payloads[K]): Uint8Array {
  return canonicalBytes(normalize(name, value));
}
