// The package ships a copy of ../../schemas and types generated from it: both must match the published schemas.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
// @ts-expect-error: the generator is a plain ES module script without type declarations
import { generatedFiles } from "../../scripts/codegen.mjs";

const PUBLISHED = new URL("../../../../schemas/", import.meta.url);
const PACKAGED = new URL("../../schemas/", import.meta.url);
const GENERATED = new URL("../../src/generated/", import.meta.url);
const index = JSON.parse(readFileSync(new URL("index.json", PUBLISHED), "utf8")) as { schemas: { file: string }[] };

describe("the packaged schemas and types", () => {
  it("are byte-for-byte the published schemas (run `npm run sync` after `om-stream schemas export`)", () => {
    for (const file of ["index.json", ...index.schemas.map((e) => e.file)]) {
      expect(readFileSync(new URL(file, PACKAGED), "utf8"), file).toBe(readFileSync(new URL(file, PUBLISHED), "utf8"));
    }
  });

  it("are the types json-schema-to-typescript generates from them now", async () => {
    const files = (await generatedFiles(fileURLToPath(PUBLISHED))) as Record<string, string>;
    expect(Object.keys(files).length).toBe(index.schemas.length + 1);
    for (const [file, text] of Object.entries(files)) {
      expect(readFileSync(new URL(file, GENERATED), "utf8"), file).toBe(text);
    }
  });
});
