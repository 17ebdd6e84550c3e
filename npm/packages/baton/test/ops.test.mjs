// Operating the sidecar from TypeScript: metrics, status, the shadow policy and the decision
// log's degradation notification (docs/operations.md). Every wait is for an event.
import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import { BatonClient, BatonError } from "../dist/index.js";
import { example, once, scratch } from "./helpers.mjs";

const seed = example("seed-switch.yaml");

test("metrics, status and a shadow policy through the client", async (t) => {
  const dir = scratch("ops");
  const client = await BatonClient.start({ db: join(dir, "b.db"), handoffDir: dir, args: ["--no-watch"] });
  t.after(() => client.close());
  await client.explain({ state_text: seed, trace: false });
  const m = await client.metrics();
  const explains = m.samples["baton_requests_total"].find((s) => s.labels.method === "explain");
  assert.equal(explains.value, 1);
  assert.match(m.text, /# TYPE baton_requests_total counter/);
  let s = await client.status();
  assert.equal(s.policy.name, "default");
  assert.equal(s.shadow, null);
  const r = await client.policyShadow("t3code");
  assert.equal(r.shadow.name, "t3code");
  s = await client.status();
  assert.equal(s.shadow.name, "t3code");
  const refused = await client.policyShadow(join(dir, "nothing-here.policy")).then(
    () => assert.fail("a missing candidate was accepted"),
    (e) => e,
  );
  assert.ok(refused instanceof BatonError);
  assert.equal((await client.policyShadow(null)).shadow, null);
  await client.close();
});

test("a decision log that cannot be written is announced, and decisions are still answered", async (t) => {
  const dir = scratch("ops-full");
  const client = await BatonClient.start({ db: join(dir, "b.db"), handoffDir: dir, args: ["--no-watch", "--decision-log", "/dev/full"] });
  t.after(() => client.close());
  const degraded = once(client, "log/degraded");
  const e = await client.explain({ state_text: seed, trace: false });
  assert.equal(e.decision.strategy, "delta_existing");
  const [params] = await degraded;
  assert.match(params.message, /No space left on device/);
  await client.close();
});
