#!/usr/bin/env node
// Builds dist/: the CommonJS build and its .d.ts with tsc (npm/node_modules), then the ESM
// entry (index.mjs, index.d.mts), a wrapper re-exporting the CommonJS build's names, so that
// `import` and `require` share one module instance (one BatonError class, one addon load).
import { execFileSync } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const pkg = join(dirname(fileURLToPath(import.meta.url)), "..");
const tsc = join(pkg, "..", "..", "node_modules", ".bin", "tsc");
rmSync(join(pkg, "dist"), { recursive: true, force: true });
execFileSync(tsc, ["-p", pkg], { stdio: "inherit" });
const names = Object.keys(createRequire(import.meta.url)(join(pkg, "dist", "index.js"))).filter(
  (n) => n !== "__esModule",
);
writeFileSync(
  join(pkg, "dist", "index.mjs"),
  `// The ESM entry: the CommonJS build's exports (scripts/build.mjs).\nimport cjs from "./index.js";\n\nexport const { ${names.join(", ")} } = cjs;\n`,
);
writeFileSync(join(pkg, "dist", "index.d.mts"), `export * from "./index.js";\n`);
console.log(`built dist/ (${names.length} exports: ${names.join(", ")})`);
