// The shared vectors (../../schemas/vectors): every client validates the valid ones, reproduces their canonical
// bytes from its own typed value, refuses the invalid ones, and partitions keys like the Java client.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { ContractError, decode, encodeCanonical, normalDateTime } from "../../src/contract.js";
import type { SchemaName } from "../../src/generated/index.js";
import { partitionFor } from "../../src/partition.js";

const VECTORS = new URL("../../../../schemas/vectors/", import.meta.url);
const read = (path: string): Buffer => readFileSync(new URL(path, VECTORS));
interface Vector { name: string; schema: SchemaName; reason?: string }
const index = JSON.parse(read("index.json").toString("utf8")) as { valid: Vector[]; invalid: Vector[] };

describe("valid vectors", () => {
  it("cover every part type and more than one vector per payload family", () => {
    expect(index.valid.length).toBeGreaterThan(40);
    expect(index.invalid.length).toBeGreaterThan(40);
  });

  it.each(index.valid.map((v) => [v.name, v] as const))("%s validates and re-serialises to its canonical bytes",
    (_name, vector) => {
      const value = decode(vector.schema, read(`valid/${vector.name}.json`));
      const canonical = read(`valid/${vector.name}.canonical.json`);
      expect(Buffer.from(encodeCanonical(vector.schema, value)).toString("utf8")).toBe(canonical.toString("utf8"));
      expect(Buffer.compare(Buffer.from(encodeCanonical(vector.schema, value)), canonical)).toBe(0);
      // the canonical bytes are a valid payload too, and a fixed point
      const again = decode(vector.schema, canonical);
      expect(Buffer.compare(Buffer.from(encodeCanonical(vector.schema, again)), canonical)).toBe(0);
    });
});

describe("invalid vectors", () => {
  it.each(index.invalid.map((v) => [v.name, v] as const))("%s is refused", (_name, vector) => {
    expect(() => decode(vector.schema, read(`invalid/${vector.name}.json`))).toThrow(ContractError);
  });
});

describe("partitioning", () => {
  it("is the Java default partitioner (murmur2) for every shared case", () => {
    const cases = (JSON.parse(read("partitions.json").toString("utf8")) as {
      cases: { key: string; partitions: number; partition: number }[];
    }).cases;
    expect(cases.length).toBeGreaterThan(50);
    for (const c of cases) expect([c.key, c.partitions, partitionFor(c.key, c.partitions)]).toEqual([c.key, c.partitions, c.partition]);
  });
  it("refuses a topic without partitions", () => {
    expect(() => partitionFor("k", 0)).toThrow(RangeError);
  });
});

describe("normal date-time", () => {
  it("writes six fraction digits, none when zero, Z for UTC", () => {
    expect(normalDateTime("2026-03-01T09:00:00.5+02:00")).toBe("2026-03-01T09:00:00.500000+02:00");
    expect(normalDateTime("2026-03-01T09:00:00.000000-00:00")).toBe("2026-03-01T09:00:00Z");
    expect(normalDateTime("2026-03-01T09:00:00.1234569Z")).toBe("2026-03-01T09:00:00.123456Z");
  });
});
