// A whole lifecycle through the client (import, dispatch, complete, switch with a pre-grant
// check and a regeneration, rollback, fork, the fork's run, merge-back) gives, step by step,
// what the `baton` command prints with --json for the same steps on another database.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { BatonClient } from "../dist/index.js";
import { cli, processGone, scratch } from "./helpers.mjs";

test("dispatch -> complete -> switch -> rollback -> fork -> merge-back matches the CLI", async (t) => {
  const dir = scratch("lifecycle");
  const docsA = join(dir, "docs-a");
  const docsB = join(dir, "docs-b");
  const dbA = join(dir, "client.db");
  const dbB = join(dir, "cli.db");
  const client = await BatonClient.start({ db: dbA, handoffDir: docsA, args: ["--no-watch"] });
  t.after(() => client.close());
  const run = (...args) => cli([...args, "--db", dbB, "--json"]);
  const decided = (...args) => run(...args, "--handoff-dir", docsB, "--policy", "default");
  const file = (name, value) => {
    const f = join(dir, name);
    writeFileSync(f, JSON.stringify(value));
    return f;
  };
  // The document paths name each side's handoff directory (of the same length: the prompt
  // that names it is measured).
  // The times each side stamped on its own requests and runs (docs/state.md, "Time and
  // workspace") differ by the milliseconds between the two calls.
  const stamped = new Set(["at", "started_at", "ended_at"]);
  const norm = (v, docs) =>
    JSON.parse(JSON.stringify(v).replaceAll(docs, "<docs>"), (k, x) => (stamped.has(k) && typeof x === "string" ? "<time>" : x));
  const same = (viaClient, viaCli, step) => assert.deepEqual(norm(viaClient, docsA), norm(viaCli, docsB), step);

  const state = { version: 1, thread: { id: "th_1", title: "Add GitHub OAuth login" }, request: { provider: "codex" } };
  same(await client.importThread({ state }), run("db", "import", file("state.json", state))[0], "import");

  const items1 = [
    { kind: "user_message", text: "Add GitHub OAuth login." },
    { kind: "assistant_message", text: "Added the callback route." },
  ];
  same(
    await client.dispatch({ thread: "th_1", target: "codex", message: "Add GitHub OAuth login." }),
    decided("dispatch", "--thread", "th_1", "--target", "codex", "--message", "Add GitHub OAuth login."),
    "dispatch",
  );
  same(
    await client.completeRun({ thread: "th_1", run: 1, items: items1 }),
    run("complete", "--thread", "th_1", "--run", "1", "--items", file("items1.json", items1)),
    "complete",
  );

  // The switch: a handoff to claude, delivered off-band with a pre-grant.
  const sw = await client.dispatch({ thread: "th_1", target: "claude", message: "Review the flow for CSRF." });
  same(sw, decided("dispatch", "--thread", "th_1", "--target", "claude", "--message", "Review the flow for CSRF."), "switch");
  assert.equal(sw.strategy, "full_new");
  assert.ok(sw.handoff);
  same(
    await client.regenerate({ thread: "th_1", handoff: sw.handoff.id, message: "Review the flow for CSRF and XSS." }),
    decided("regenerate", "--thread", "th_1", "--handoff", sw.handoff.id, "--message", "Review the flow for CSRF and XSS."),
    "regenerate",
  );
  const doc = (docs) => join(docs, "th_1", "H2", "handoff.md");
  same(
    await client.pregrantCheck({ thread: "th_1", run: 2, tool: "Read", args: { file_path: doc(docsA) } }),
    run("pregrant", "check", "--thread", "th_1", "--run", "2", "--tool", "Read", "--path", doc(docsB)),
    "pregrant/check",
  );
  const items2 = [{ kind: "assistant_message", text: "Added a CSRF check." }];
  same(
    await client.completeRun({ thread: "th_1", run: 2, items: items2 }),
    run("complete", "--thread", "th_1", "--run", "2", "--items", file("items2.json", items2)),
    "complete the switch",
  );

  same(await client.rollback({ thread: "th_1", to: 1 }), run("rollback", "--thread", "th_1", "--to", "1", "--policy", "default"), "rollback");
  same(await client.fork({ thread: "th_1", at: 1, child: "th_1-try" }), run("fork", "--thread", "th_1", "--at", "1", "--child", "th_1-try"), "fork");
  same(
    await client.dispatch({ thread: "th_1-try", target: "codex", message: "Try a cookie store." }),
    decided("dispatch", "--thread", "th_1-try", "--target", "codex", "--message", "Try a cookie store."),
    "the fork's run",
  );
  const items3 = [{ kind: "assistant_message", text: "Tried a cookie store." }];
  same(
    await client.completeRun({ thread: "th_1-try", run: 2, items: items3 }),
    run("complete", "--thread", "th_1-try", "--run", "2", "--items", file("items3.json", items3)),
    "complete the fork's run",
  );
  const mb = await client.mergeBack({ thread: "th_1-try", message: "Keep the cookie store." });
  same(mb, decided("merge-back", "--thread", "th_1-try", "--message", "Keep the cookie store."), "merge-back");
  assert.equal(mb.recorded.started, false);

  // The stored threads are the same too.
  for (const thread of ["th_1", "th_1-try"]) {
    same((await client.exportThread({ thread })).state, run("db", "export", "--thread", thread), `export ${thread}`);
  }
  const pid = client.pid;
  await client.close();
  assert.ok(processGone(pid));
});
