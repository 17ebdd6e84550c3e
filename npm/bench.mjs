#!/usr/bin/env node
// What the Node bindings cost (docs/performance.md#node): a bench, not a test. Usage:
//
//   BATON_BINARY=target/release/baton BATON_ADDON=target/release/libbaton_node.so \
//     node npm/bench.mjs            (after npm/ci.sh built npm/packages/baton/dist)
//
// On examples/seed-switch.yaml and the bench threads of benches/engine.rs (100 and 1,000 runs;
// the addon exports the same generator, benches/support/thread.rs), one process, one run:
//  - addon: `Engine.decide(text)` from JavaScript: the napi call, the state text in, the
//    decision's JSON text out and JSON.parse'd (what an app gets);
//  - rust: the same work in a Rust loop inside the addon (parse, decide, serialize), the
//    in-process Rust baseline; and the decision alone on the parsed state;
//  - sidecar: `explain` through BatonClient (a JSON-RPC round trip over stdio), against the
//    addon's `explain` (the same work in process).
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const require = createRequire(import.meta.url);
const { BatonClient, Engine } = require("./packages/baton/dist/index.js");
// The addon itself (a cargo build's .so is loaded as the .node file it is).
const native = { exports: {} };
process.dlopen(native, resolve(process.env.BATON_ADDON));
const { NativeEngine, benchNative, benchStateYaml } = native.exports;
// 10,000 runs is 9.7 MB of YAML: past the service's 8 MiB message limit, and seconds of
// parsing per call; BENCH_SIZES=100,1000,10000 adds it (the sidecar column is then skipped).
const SIZES = (process.env.BENCH_SIZES ?? "100,1000").split(",").map(Number);
const BUDGET_MS = Number(process.env.BENCH_MS ?? 1500);

/** Mean ms per call of `f`, run for about BUDGET_MS after a warm-up (at least 5 calls). */
async function time(f) {
  for (let i = 0; i < 3; i++) await f();
  let n = 0;
  const start = performance.now();
  while (n < 5 || performance.now() - start < BUDGET_MS) {
    await f();
    n++;
  }
  return (performance.now() - start) / n;
}

const root = "/tmp/baton-bench";
const engine = new Engine("default", { documentRoot: root });
const raw = new NativeEngine("default", null, null, root);
const client = await BatonClient.start({ handoffDir: root, db: `${root}/unused.db`, args: ["--no-watch"] });
const rows = [];
const seed = readFileSync(join(dirname(fileURLToPath(import.meta.url)), "..", "examples", "seed-switch.yaml"), "utf8");
const inputs = [["seed-switch.yaml", seed], ...SIZES.map((n) => [`${n.toLocaleString("en")} runs`, benchStateYaml(n)])];
for (const [n, text] of inputs) {
  if (engine.decide(text).strategy !== "delta_existing") throw new Error("not the bench decision");
  const addon = await time(() => engine.decide(text));
  const iterations = Math.max(5, Math.round(BUDGET_MS / addon));
  const [rustWhole, rustDecide] = benchNative(raw, text, iterations).map((ns) => ns / 1e6);
  const addonExplain = await time(() => engine.explain(text));
  const sidecar = text.length < 8 << 20 ? await time(() => client.explain({ state_text: text })) : NaN;
  rows.push({ n, kb: text.length / 1024, addon, rustWhole, rustDecide, addonExplain, sidecar });
}
await client.close();

const text_kb = (r) => `${r.kb.toFixed(1)} KB`;
const ms = (x) => (x < 1 ? `${(x * 1000).toFixed(0)} µs` : `${x.toFixed(2)} ms`);
console.log("| state | size | addon decide | Rust: parse+decide+serialize | addon / Rust | Rust: decide alone | addon explain | sidecar explain | sidecar / addon |");
console.log("|---|---|---|---|---|---|---|---|---|");
for (const r of rows) {
  console.log(
    `| ${r.n} | ${r.kb < 10 ? text_kb(r) : `${Math.round(r.kb)} KB`} | ${ms(r.addon)} | ${ms(r.rustWhole)} | ${(r.addon / r.rustWhole).toFixed(2)}x | ${ms(r.rustDecide)} | ${ms(r.addonExplain)} | ${ms(r.sidecar)} | ${(r.sidecar / r.addonExplain).toFixed(2)}x |`,
  );
}
