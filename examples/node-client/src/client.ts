// End-to-end test of `baton serve --stdio` from TypeScript, through the standard
// vscode-jsonrpc client (wrapped by the typed `Baton` class of baton.ts), the way an Electron or
// Node app embeds baton as a sidecar. Run: `npm ci && npm test` (BATON_BIN points at the
// binary; default ../../target/debug/baton).
import assert from "node:assert/strict";
import { mkdtempSync, mkdirSync, copyFileSync, readFileSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Baton, type Dispatched, type Explained, type Item, type Notifications } from "./baton";

const here = resolve(__dirname, "..");
const repo = resolve(here, "../..");
const bin = resolve(here, process.env.BATON_BIN ?? "../../target/debug/baton");

// A private policy directory, so that the test can edit it to exercise hot reload.
const work = mkdtempSync(join(tmpdir(), "baton-node-client-"));
const policyDir = join(work, "policies");
const policyFile = join(policyDir, "default.policy");
mkdirSync(policyDir);
copyFileSync(join(repo, "policies/default.policy"), policyFile);

const baton = Baton.spawn(bin, ["--policy", policyDir, "--debounce-ms", "100"], {
  BATON_DB: join(work, "baton.db"),
  BATON_HANDOFF_DIR: join(work, "handoffs"),
});
baton.child.on("error", (e) => {
  console.error(`not ok - cannot start ${bin}: ${e.message} (build it, or set BATON_BIN)`);
  process.exit(1);
});

type Note = { [M in keyof Notifications]: { method: M; params: Notifications[M] } }[keyof Notifications];
const notes: Note[] = [];
const waiters: (() => void)[] = [];
baton.on("policy/loaded", (params) => heard({ method: "policy/loaded", params }));
baton.on("policy/rejected", (params) => heard({ method: "policy/rejected", params }));
function heard(n: Note): void {
  notes.push(n);
  for (const w of waiters.splice(0)) w();
}

/** Wait until a notification `method` satisfying `pred` has arrived (10 s at most). */
async function notification<M extends keyof Notifications>(
  method: M,
  pred: (p: Notifications[M]) => boolean = () => true,
): Promise<Notifications[M]> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const hit = notes.find((n) => n.method === method && pred(n.params as Notifications[M]));
    if (hit) return hit.params as Notifications[M];
    if (Date.now() > deadline) throw new Error(`no ${method} notification within 10 s`);
    await new Promise<void>((ok) => {
      waiters.push(ok);
      setTimeout(ok, 200);
    });
  }
}

const stateText = (name: string): string => readFileSync(join(repo, "examples", name), "utf8");
let passed = 0;
const step = (name: string): void => console.log(`ok ${++passed} - ${name}`);

async function main(): Promise<void> {
  const health = await baton.health();
  assert.equal(health.status, "ok");
  const status = await baton.policyStatus();
  assert.match(status.sha256, /^[0-9a-f]{64}$/);
  step(`health ok, policy ${status.name} ${status.sha256.slice(0, 12)}`);

  // Seed 000 run by run, as the app would drive it: runs 1-5 on codex, 6-8 on claude, 9 back
  // on codex. The thread starts empty in the store.
  await baton.importThread({
    state: { version: 1, thread: { id: "th_1", title: "Add GitHub OAuth login" }, request: { provider: "codex" } },
  });
  const seed = JSON.parse(readFileSync(join(here, "seed-000-items.json"), "utf8")) as {
    message: string;
    items: Item[];
  }[];
  const runs: Record<number, Dispatched> = {};
  for (const [i, target] of ["codex", "codex", "codex", "codex", "codex", "claude", "claude", "claude"].entries()) {
    const d = await baton.dispatch({ thread: "th_1", target, message: seed[i].message });
    assert.equal(d.recorded.run, i + 1);
    assert.equal(d.recorded.started, true);
    assert.equal(d.policy.sha256, status.sha256, "every decision names the policy that made it");
    runs[d.recorded.run] = d;
    const c = await baton.completeRun({ thread: "th_1", run: d.recorded.run, items: seed[i].items });
    assert.equal(c.status, "completed");
  }
  assert.equal(runs[1].provider_thread.action, "create");
  const codexThread = runs[1].recorded.provider_thread;
  assert.equal(runs[5].strategy, "no_handoff");
  assert.deepEqual(runs[5].provider_thread, { action: "resume", id: codexThread });
  step(`runs 1-5 on codex: created ${codexThread}, then resumed it with no handoff`);

  const r6 = runs[6];
  assert.equal(r6.target, "claude");
  assert.equal(r6.strategy, "full_new");
  assert.equal(r6.provider_thread.action, "create");
  assert.deepEqual(r6.covered_runs, { from: 1, to: 5 });
  const h6 = runs[6].handoff;
  assert.ok(h6, "run 6 records its handoff");
  assert.equal(h6.id, r6.handoff_id);
  step("run 6 on claude: full_new, create, covers runs 1-5");

  const d9 = await baton.dispatch({ thread: "th_1", target: "codex", message: "Now add tests for the CSRF check.", trace: false });
  assert.equal(d9.recorded.run, 9);
  assert.equal(d9.strategy, "delta_existing");
  assert.deepEqual(d9.provider_thread, { action: "resume", id: codexThread });
  assert.deepEqual(d9.covered_runs, { from: 6, to: 8 });
  assert.equal(d9.policy.sha256, status.sha256);
  assert.equal(d9.trace, undefined, "trace: false leaves the trace out");
  assert.ok(Array.isArray(runs[8].trace), "the trace is there by default");
  step(`run 9 back on codex: delta_existing, resume ${codexThread}, covers runs 6-8`);

  // The child may Read exactly its handoff document, once.
  if (d9.pregrant) {
    const path = d9.pregrant.path;
    const allow = await baton.pregrantCheck({ thread: "th_1", run: 9, tool: "Read", args: { file_path: path } });
    assert.equal(allow.allow, true, allow.reason);
    const again = await baton.pregrantCheck({ thread: "th_1", run: 9, tool: "Read", path });
    assert.equal(again.allow, false);
    step(`pre-grant: Read of the handoff allowed once, then denied (${again.reason})`);
  }
  await baton.completeRun({ thread: "th_1", run: 9, items: [] });

  // A fork, its first run, and the merge-back into the parent, which the parent's next
  // dispatch takes.
  const f = await baton.fork({ thread: "th_1", at: 9, child: "th_1-try" });
  assert.equal(f.parent, "th_1");
  const fd = await baton.dispatch({ thread: "th_1-try", target: "codex" });
  assert.equal(fd.strategy, "native_fork");
  await baton.completeRun({ thread: "th_1-try", run: fd.recorded.run, items: [{ kind: "assistant_message", text: "Tried a cookie store." }] });
  const m = await baton.mergeBack({ thread: "th_1-try", trace: false });
  assert.equal(m.recorded.started, false);
  assert.equal(m.handoff?.strategy, "fork_delta_summary");
  assert.equal(m.handoff?.covered_thread, "th_1-try");
  const taken = await baton.dispatch({ thread: "th_1", target: "codex" });
  assert.equal(taken.recorded.run, m.recorded.run);
  assert.equal(taken.handoff?.id ?? taken.merge_back?.id, m.handoff?.id);
  await baton.completeRun({ thread: "th_1", run: taken.recorded.run, items: [] });
  const rb = await baton.rollback({ thread: "th_1", to: 9 });
  assert.deepEqual(rb.runs_rolled_back, [10]);
  step(`fork ${f.child}: native_fork, merge-back ${m.handoff?.id} taken by run ${taken.recorded.run}, rolled back`);

  // The inline forms: the same seed example from state files.
  const i6 = await baton.explain({ state_text: stateText("seed-run6.yaml"), trace: false });
  assert.equal(i6.decision.trace, undefined);
  assert.equal(i6.decision.strategy, "full_new");
  const i9 = await baton.render({ state_text: stateText("seed-switch.yaml") });
  assert.equal(i9.decision.strategy, "delta_existing");
  assert.deepEqual(i9.decision.covered_runs, { from: 6, to: 8 });
  assert.ok(i9.handoff, "render returns the handoff");
  assert.ok(i9.handoff.document.includes("CSRF"), "the delta document covers runs 6-8");
  assert.equal(i9.handoff.document_path, i9.decision.delivery?.document);
  step("explain/render of inline states agree: run 6 full_new, run 9 delta_existing");

  // Bad input is answered with the standard codes and the server keeps serving.
  await assert.rejects(baton.call("no/such/method"), (e: { code?: number }) => e.code === -32601);
  await assert.rejects(baton.call("explain", { state: 42 }), (e: { code?: number }) => e.code === -32602);
  step("unknown method -32601, wrong params -32602");

  // Hot reload: edit the policy; the watcher swaps the new set in.
  const text = readFileSync(policyFile, "utf8");
  writeFileSync(policyFile, text + "\n# edited by the node client\n");
  const loaded = await notification("policy/loaded", (p) => p.policy.sha256 !== status.sha256);
  const newSha = loaded.policy.sha256;
  assert.equal((await baton.policyStatus()).sha256, newSha);
  // The deprecated camelCase param is still accepted.
  const again = (await baton.call("explain", { stateText: stateText("seed-switch.yaml") })) as Explained;
  assert.equal(again.decision.policy.sha256, newSha);
  assert.equal(again.decision.strategy, "delta_existing");
  step(`hot reload: policy/loaded ${newSha.slice(0, 12)}, decisions carry the new sha256`);

  // A set that does not check is rejected; the last good set keeps serving.
  writeFileSync(policyFile, text + "\nladder {\n");
  const rejected = await notification("policy/rejected");
  assert.ok(rejected.diagnostics.length > 0);
  assert.match(rejected.diagnostics[0].file, /default\.policy$/);
  const still = await baton.explain({ state_text: stateText("seed-switch.yaml") });
  assert.equal(still.decision.policy.sha256, newSha);
  assert.equal((await baton.policyStatus()).last_rejection?.diagnostics.length, rejected.diagnostics.length);
  step(`bad edit rejected (${rejected.diagnostics[0].message}); still serving ${newSha.slice(0, 12)}`);

  assert.equal(await baton.close(), 0);
  step("shutdown + exit: server exited 0");
}

main()
  .then(() => console.log(`${passed} passed, 0 failed`))
  .catch((e: unknown) => {
    console.error(`not ok - ${e instanceof Error ? e.stack : String(e)}`);
    baton.child.kill();
    process.exitCode = 1;
  })
  .finally(() => rmSync(work, { recursive: true, force: true }));
