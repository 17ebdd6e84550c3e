// End-to-end test of `baton serve --stdio` through the standard vscode-jsonrpc client, the way
// an Electron or Node app embeds baton as a sidecar. Run: `npm ci && node client.mjs`
// (BATON_BIN points at the binary; default ../../target/debug/baton).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, mkdirSync, copyFileSync, readFileSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import * as rpc from "vscode-jsonrpc/node.js";

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, "../..");
const bin = resolve(here, process.env.BATON_BIN ?? "../../target/debug/baton");

// A private policy directory, so that the test can edit it to exercise hot reload.
const work = mkdtempSync(join(tmpdir(), "baton-node-client-"));
const policyDir = join(work, "policies");
const policyFile = join(policyDir, "default.policy");
mkdirSync(policyDir);
copyFileSync(join(repo, "policies/default.policy"), policyFile);

const child = spawn(bin, ["serve", "--stdio", "--policy", policyDir, "--debounce-ms", "100"], {
  env: {
    ...process.env,
    BATON_DB: join(work, "baton.db"),
    BATON_HANDOFF_DIR: join(work, "handoffs"),
  },
  stdio: ["pipe", "pipe", "inherit"],
});
const exited = new Promise((ok) => child.on("exit", (code) => ok(code)));
child.on("error", (e) => {
  console.error(`not ok - cannot start ${bin}: ${e.message} (build it, or set BATON_BIN)`);
  process.exit(1);
});

const conn = rpc.createMessageConnection(
  new rpc.StreamMessageReader(child.stdout),
  new rpc.StreamMessageWriter(child.stdin),
);
const notes = [];
const waiters = [];
for (const method of ["policy/loaded", "policy/rejected"]) {
  conn.onNotification(method, (params) => {
    notes.push({ method, params });
    for (const w of waiters.splice(0)) w();
  });
}
conn.listen();

/** Wait until a notification `method` satisfying `pred` has arrived (10 s at most). */
async function notification(method, pred = () => true) {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const hit = notes.find((n) => n.method === method && pred(n.params));
    if (hit) return hit.params;
    if (Date.now() > deadline) throw new Error(`no ${method} notification within 10 s`);
    await new Promise((ok) => {
      waiters.push(ok);
      setTimeout(ok, 200);
    });
  }
}

const stateText = (name) => readFileSync(join(repo, "examples", name), "utf8");
const req = (method, params) => conn.sendRequest(method, params ?? {});
let passed = 0;
const step = (name) => console.log(`ok ${++passed} - ${name}`);

try {
  const health = await req("health");
  assert.equal(health.status, "ok");
  const status = await req("policy/status");
  assert.match(status.sha256, /^[0-9a-f]{64}$/);
  step(`health ok, policy ${status.name} ${status.sha256.slice(0, 12)}`);

  // Seed 000 run by run, as the app would drive it: runs 1-5 on codex, 6-8 on claude, 9 back
  // on codex. The thread starts empty in the store.
  await req("thread/import", {
    state: { version: 1, thread: { id: "th_1", title: "Add GitHub OAuth login" }, request: { provider: "codex" } },
  });
  const seed = JSON.parse(readFileSync(join(here, "seed-000-items.json"), "utf8"));
  const runs = {};
  for (const [i, target] of ["codex", "codex", "codex", "codex", "codex", "claude", "claude", "claude"].entries()) {
    const d = await req("dispatch", { thread: "th_1", target, message: seed[i].message });
    assert.equal(d.run, i + 1);
    assert.equal(d.started, true);
    assert.equal(d.decision.policy.sha256, status.sha256, "every decision names the policy that made it");
    assert.equal(d.policy.sha256, status.sha256);
    runs[d.run] = d;
    const c = await req("completeRun", { thread: "th_1", run: d.run, items: seed[i].items });
    assert.equal(c.status, "completed");
  }
  assert.equal(runs[1].decision.provider_thread.action, "create");
  const codexThread = runs[1].providerThread;
  assert.equal(runs[5].decision.strategy, "no_handoff");
  assert.deepEqual(runs[5].decision.provider_thread, { action: "resume", id: codexThread });
  step(`runs 1-5 on codex: created ${codexThread}, then resumed it with no handoff`);

  const r6 = runs[6].decision;
  assert.equal(r6.target, "claude");
  assert.equal(r6.strategy, "full_new");
  assert.equal(r6.provider_thread.action, "create");
  assert.deepEqual(r6.covered_runs, { from: 1, to: 5 });
  assert.equal(runs[6].handoff.id, r6.handoff_id);
  step("run 6 on claude: full_new, create, covers runs 1-5");

  const d9 = await req("dispatch", { thread: "th_1", target: "codex", message: "Now add tests for the CSRF check." });
  assert.equal(d9.run, 9);
  assert.equal(d9.decision.strategy, "delta_existing");
  assert.deepEqual(d9.decision.provider_thread, { action: "resume", id: codexThread });
  assert.deepEqual(d9.decision.covered_runs, { from: 6, to: 8 });
  assert.equal(d9.decision.policy.sha256, status.sha256);
  step(`run 9 back on codex: delta_existing, resume ${codexThread}, covers runs 6-8`);

  // The child may Read exactly its handoff document, once.
  if (d9.decision.pregrant) {
    const path = d9.decision.pregrant.path;
    const allow = await req("pregrant/check", { thread: "th_1", run: 9, tool: "Read", args: { file_path: path } });
    assert.equal(allow.allow, true, allow.reason);
    const again = await req("pregrant/check", { thread: "th_1", run: 9, tool: "Read", path });
    assert.equal(again.allow, false);
    step(`pre-grant: Read of the handoff allowed once, then denied (${again.reason})`);
  }
  await req("completeRun", { thread: "th_1", run: 9, items: [] });

  // The inline forms: the same seed example from state files.
  const i6 = await req("explain", { stateText: stateText("seed-run6.yaml") });
  assert.equal(i6.decision.strategy, "full_new");
  const i9 = await req("render", { stateText: stateText("seed-switch.yaml") });
  assert.equal(i9.decision.strategy, "delta_existing");
  assert.deepEqual(i9.decision.covered_runs, { from: 6, to: 8 });
  assert.ok(i9.handoff.document.includes("CSRF"), "the delta document covers runs 6-8");
  step("explain/render of inline states agree: run 6 full_new, run 9 delta_existing");

  // Bad input is answered with the standard codes and the server keeps serving.
  await assert.rejects(req("no/such/method"), (e) => e.code === -32601);
  await assert.rejects(req("explain", { state: 42 }), (e) => e.code === -32602);
  step("unknown method -32601, wrong params -32602");

  // Hot reload: edit the policy; the watcher swaps the new set in.
  const text = readFileSync(policyFile, "utf8");
  writeFileSync(policyFile, text + "\n# edited by the node client\n");
  const loaded = await notification("policy/loaded", (p) => p.policy.sha256 !== status.sha256);
  const newSha = loaded.policy.sha256;
  assert.equal((await req("policy/status")).sha256, newSha);
  const again = await req("explain", { stateText: stateText("seed-switch.yaml") });
  assert.equal(again.decision.policy.sha256, newSha);
  assert.equal(again.decision.strategy, "delta_existing");
  step(`hot reload: policy/loaded ${newSha.slice(0, 12)}, decisions carry the new sha256`);

  // A set that does not check is rejected; the last good set keeps serving.
  writeFileSync(policyFile, text + "\nladder {\n");
  const rejected = await notification("policy/rejected");
  assert.ok(rejected.diagnostics.length > 0);
  assert.match(rejected.diagnostics[0].file, /default\.policy$/);
  const still = await req("explain", { stateText: stateText("seed-switch.yaml") });
  assert.equal(still.decision.policy.sha256, newSha);
  assert.equal((await req("policy/status")).lastRejection.diagnostics.length, rejected.diagnostics.length);
  step(`bad edit rejected (${rejected.diagnostics[0].message}); still serving ${newSha.slice(0, 12)}`);

  await req("shutdown");
  conn.sendNotification("exit");
  assert.equal(await exited, 0);
  step("shutdown + exit: server exited 0");
  console.log(`${passed} passed, 0 failed`);
} catch (e) {
  console.error(`not ok - ${e.stack ?? e}`);
  child.kill();
  process.exitCode = 1;
} finally {
  conn.dispose();
  rmSync(work, { recursive: true, force: true });
}
