// Copies the published schemas (../../schemas) into the package and regenerates src/generated/.
import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { generatedFiles } from "./codegen.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const source = join(here, "..", "..", "..", "schemas");
const target = join(here, "..", "schemas");
const generated = join(here, "..", "src", "generated");

const index = JSON.parse(await readFile(join(source, "index.json"), "utf8"));
await rm(target, { recursive: true, force: true });
for (const file of ["index.json", ...index.schemas.map((e) => e.file)]) {
  await mkdir(dirname(join(target, file)), { recursive: true });
  await writeFile(join(target, file), await readFile(join(source, file)));
}
await rm(generated, { recursive: true, force: true });
await mkdir(generated, { recursive: true });
for (const [file, text] of Object.entries(await generatedFiles(target))) {
  await writeFile(join(generated, file), text);
}
console.log(`synced ${index.schemas.length} schemas and their types`);
