// TypeScript types generated from the published JSON Schemas (json-schema-to-typescript).
// `npm run sync` writes them (and the schema copies the package ships); a unit test fails when they drift.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { compile } from "json-schema-to-typescript";

const BANNER = "/* Generated from schemas/ by `npm run sync` (scripts/codegen.mjs). Do not edit. */";

const SHAPE = ["type", "$ref", "anyOf", "oneOf", "const", "enum", "properties", "items"];

/** The cross-field rules (allOf / if / then, the root oneOf of a response) are for validators, not for types;
 * a property without any shape (`Any` in the model: tool args and results) is any JSON value. */
function typeShape(node, isProperty = false) {
  if (Array.isArray(node)) return node.map((item) => typeShape(item));
  if (node === null || typeof node !== "object") return node;
  if (isProperty && !SHAPE.some((key) => key in node)) return { ...node, tsType: "unknown" };
  const out = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === "allOf" || key === "if" || key === "then" || key === "else") continue;
    if (key === "oneOf" && value.every((branch) => !("$ref" in branch) && !("type" in branch))) continue;
    out[key] = key === "properties"
      ? Object.fromEntries(Object.entries(value).map(([name, prop]) => [name, typeShape(prop, true)]))
      : typeShape(value);
  }
  return out;
}

/** Module name of a schema: om.message/v1 -> om.message.v1 */
export const moduleName = (name) => name.replace("/", ".");

/** { relative path under src/generated: file content } for every schema in `schemasDir`. */
export async function generatedFiles(schemasDir) {
  const index = JSON.parse(await readFile(join(schemasDir, "index.json"), "utf8"));
  const files = {};
  const lines = [BANNER, ""];
  const map = [];
  for (const entry of index.schemas) {
    const schema = JSON.parse(await readFile(join(schemasDir, entry.file), "utf8"));
    const ts = await compile(typeShape(schema), entry.title, {
      bannerComment: BANNER, additionalProperties: false, format: true, unknownAny: true,
      strictIndexSignatures: true, declareExternallyReferenced: true,
      style: { printWidth: 120 },
    });
    files[`${moduleName(entry.name)}.ts`] = ts;
    lines.push(`import type { ${entry.title} } from "./${moduleName(entry.name)}.js";`);
    lines.push(`export type { ${entry.title} };`);
    map.push(`  "${entry.name}": ${entry.title};`);
  }
  lines.push("", "/** Every published payload type, by schema name. */", "export interface Payloads {", ...map, "}", "");
  lines.push("export type SchemaName = keyof Payloads;", "");
  files["index.ts"] = lines.join("\n");
  return files;
}
