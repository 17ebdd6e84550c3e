#!/usr/bin/env node
// One version for the crate and the npm packages (docs/node.md#versioning): the root crate's
// version must be the addon crate's, every package's, and every pinned optional dependency's.
// Exit 1 naming each that differs.
import { readFileSync, readdirSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const npm = dirname(fileURLToPath(import.meta.url));
const cargoVersion = (file) => {
  const text = readFileSync(file, "utf8");
  const pkg = text.split(/^\[/m).find((s) => s.startsWith("package]"));
  const m = pkg && /^version\s*=\s*"([^"]+)"/m.exec(pkg);
  if (!m) throw new Error(`${file}: no [package] version`);
  return m[1];
};
const want = cargoVersion(join(npm, "..", "Cargo.toml"));
const found = [[join("npm", "addon", "Cargo.toml"), cargoVersion(join(npm, "addon", "Cargo.toml"))]];
for (const dir of readdirSync(join(npm, "packages"))) {
  const file = join("npm", "packages", dir, "package.json");
  const pkg = JSON.parse(readFileSync(join(npm, "..", file), "utf8"));
  found.push([file, pkg.version]);
  for (const [name, v] of Object.entries(pkg.optionalDependencies ?? {})) {
    found.push([`${file} optionalDependencies.${name}`, v]);
  }
}
const bad = found.filter(([, v]) => v !== want);
for (const [where, v] of bad) console.error(`${where}: version ${v}, but the crate (Cargo.toml) is ${want}`);
if (bad.length) {
  console.error("give every package the crate's version (docs/node.md#versioning)");
  process.exit(1);
}
console.log(`versions match: ${want} (${found.length} places)`);
