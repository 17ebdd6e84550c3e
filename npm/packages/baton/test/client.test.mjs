// The sidecar client: a crash mid-request, cancellation, 200 requests at once, policy reload
// events, timeouts, clean shutdown with no process left behind. Every wait is for an event
// (a FIFO the summarizer opens, a notification, a process exit), never a deadline.
import assert from "node:assert/strict";
import { writeFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { BatonClient, BatonError, Engine, ErrorCode } from "../dist/index.js";
import { example, gatedPolicy, once, processGone, scratch } from "./helpers.mjs";

const seed = example("seed-switch.yaml");

/** Start a client that is closed when the test ends, passed or not. */
async function start(t, opts) {
  const client = await BatonClient.start(opts);
  t.after(() => client.close());
  return client;
}

test("the sidecar killed with SIGKILL mid-request: a typed error, then the next request succeeds", async (t) => {
  const dir = scratch("kill");
  const gated = gatedPolicy(dir);
  const client = await start(t, { policy: gated.policy, db: join(dir, "b.db"), handoffDir: dir, args: ["--no-watch"] });
  const first = client.pid;
  const pending = client.render({ state_text: seed, target: "codex" });
  assert.equal(await gated.started(), "started"); // the render is inside the summarizer
  const exited = once(client, "exit");
  const restarted = once(client, "restart");
  process.kill(first, "SIGKILL");
  const err = await pending.then(
    () => assert.fail("the render answered"),
    (e) => e,
  );
  assert.ok(err instanceof BatonError);
  assert.equal(err.code, ErrorCode.SidecarExited);
  assert.equal(err.method, "render");
  assert.match(err.message, /was killed by SIGKILL while `render` was in flight/);
  const [info] = await exited;
  assert.equal(info.signal, "SIGKILL");
  gated.release(); // the orphaned summarizer finishes
  const [r] = await restarted;
  assert.notEqual(r.pid, first);
  assert.ok(processGone(first), "the killed sidecar was reaped");
  const e = await client.explain({ state_text: seed, target: "claude", trace: false });
  assert.equal(e.decision.target, "claude");
  await client.close();
  assert.ok(processGone(r.pid));
});

test("a request sent while the sidecar restarts waits for it and succeeds", async (t) => {
  const dir = scratch("restart");
  const client = await start(t, { db: join(dir, "b.db"), handoffDir: dir, args: ["--no-watch"] });
  const exited = once(client, "exit");
  process.kill(client.pid, "SIGKILL");
  await exited;
  const h = await client.health();
  assert.equal(h.status, "ok");
  await client.close();
});

test("cancellation with an AbortSignal: $/cancelRequest, answered -32800", async (t) => {
  const dir = scratch("cancel");
  const gated = gatedPolicy(dir);
  const client = await start(t, { policy: gated.policy, db: join(dir, "b.db"), handoffDir: dir, args: ["--no-watch"] });
  const ac = new AbortController();
  const pending = client.render({ state_text: seed, target: "codex" }, { signal: ac.signal });
  assert.equal(await gated.started(), "started");
  ac.abort();
  const err = await pending.then(
    () => assert.fail("answered"),
    (e) => e,
  );
  assert.equal(err.code, ErrorCode.RequestCancelled);
  assert.match(err.message, /`render` was cancelled by the client/);
  gated.release();
  // Aborted before it is sent: never sent.
  const pre = await client.health({ signal: AbortSignal.abort() }).then(
    () => assert.fail("answered"),
    (e) => e,
  );
  assert.equal(pre.code, ErrorCode.RequestCancelled);
  assert.equal((await client.health()).in_flight, 0);
  await client.close();
});

test("a request past its timeout fails with Timeout and is cancelled on the service", async (t) => {
  const dir = scratch("timeout");
  const gated = gatedPolicy(dir);
  const client = await start(t, { policy: gated.policy, db: join(dir, "b.db"), handoffDir: dir, args: ["--no-watch"] });
  // The render waits in the summarizer until released, so it cannot beat a 1 ms timeout.
  const pending = client.render({ state_text: seed, target: "codex" }, { timeoutMs: 1 });
  const err = await pending.then(
    () => assert.fail("answered"),
    (e) => e,
  );
  assert.equal(err.code, ErrorCode.Timeout);
  assert.equal(await gated.started(), "started");
  gated.release();
  assert.equal((await client.health()).status, "ok");
  await client.close();
});

test("200 concurrent requests all answer, each as the addon decides", async (t) => {
  const dir = scratch("many");
  const client = await start(t, { db: join(dir, "b.db"), handoffDir: dir, args: ["--no-watch"] });
  const engine = new Engine("default", { documentRoot: dir });
  const targets = ["codex", "claude", "cursor", "copilot"];
  const results = await Promise.all(
    Array.from({ length: 200 }, (_, i) =>
      client.explain({ state_text: seed.replace("th_seed", `th_${i}`), target: targets[i % 4], trace: false }),
    ),
  );
  assert.equal(results.length, 200);
  for (const [i, r] of results.entries()) {
    assert.deepEqual(r, engine.explain(seed.replace("th_seed", `th_${i}`), { target: targets[i % 4], trace: false }));
  }
  assert.equal((await client.health()).in_flight, 0);
  await client.close();
});

test("policy reloads arrive as events", async (t) => {
  const dir = scratch("reload");
  const pdir = join(dir, "policies");
  mkdirSync(pdir);
  writeFileSync(join(pdir, "team.policy"), 'policy "team" {\n  extends "default"\n}\n');
  const client = await start(t, { policy: pdir, db: join(dir, "b.db"), handoffDir: dir, args: ["--debounce-ms", "20"] });
  const before = await client.policyStatus();
  assert.equal(before.name, "team");
  const loaded = once(client, "policy/loaded");
  writeFileSync(join(pdir, "team.policy"), 'policy "team2" {\n  extends "default"\n}\n');
  const [l] = await loaded;
  assert.equal(l.policy.name, "team2");
  assert.equal(l.generation, 2);
  const rejected = once(client, "policy/rejected");
  writeFileSync(join(pdir, "team.policy"), 'policy "team3" {\n  extends "nope"\n}\n');
  const [r] = await rejected;
  assert.equal(r.serving.name, "team2");
  assert.ok(r.diagnostics.length > 0);
  const err = await client.policyReload().then(
    () => assert.fail("reloaded"),
    (e) => e,
  );
  assert.equal(err.code, ErrorCode.PolicyError);
  assert.ok(Array.isArray(err.data.diagnostics));
  await client.close();
});

test("close() finishes what is in flight, and leaves no process (no zombie)", async (t) => {
  const dir = scratch("close");
  const client = await start(t, { db: join(dir, "b.db"), handoffDir: dir, args: ["--no-watch"] });
  const pid = client.pid;
  const inFlight = client.explain({ state_text: seed, trace: false });
  const closing = client.close();
  assert.equal((await inFlight).decision.strategy, "delta_existing");
  await closing;
  assert.ok(processGone(pid), `process ${pid} is gone`);
  const err = await client.health().then(
    () => assert.fail("answered"),
    (e) => e,
  );
  assert.equal(err.code, ErrorCode.ClientClosed);
});

test("a socket client talks to a running service and closing it leaves the service up", async (t) => {
  const dir = scratch("socket");
  const { spawn } = await import("node:child_process");
  const sock = join(dir, "baton.sock");
  const server = spawn(process.env.BATON_BINARY, ["serve", "--socket", sock, "--db", join(dir, "b.db"), "--no-watch"], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  // The socket file appears when the service binds it (an inotify event, not a deadline).
  const { existsSync, watch } = await import("node:fs");
  await new Promise((resolve) => {
    const w = watch(dir, () => {
      if (existsSync(sock)) {
        w.close();
        resolve();
      }
    });
    if (existsSync(sock)) {
      w.close();
      resolve();
    }
  });
  // bind and listen are one call in the service; a connect between them is refused: retry.
  const connect = async () => {
    for (let i = 0; ; i++) {
      try {
        return await BatonClient.connect(sock);
      } catch (e) {
        if (i > 1000 || !/ECONNREFUSED/.test(e.message)) throw e;
        await new Promise((r) => setImmediate(r));
      }
    }
  };
  const a = await connect();
  const b = await connect();
  assert.equal((await a.explain({ state_text: seed, trace: false })).decision.strategy, "delta_existing");
  await a.close();
  assert.equal((await b.health()).status, "ok");
  await b.close();
  const exited = once(server, "exit");
  server.kill("SIGTERM");
  const [code] = await exited;
  assert.equal(code, 0);
});

test("with allowExitOnIdle, an app that never calls close() still exits", async () => {
  const { spawn } = await import("node:child_process");
  const dir = scratch("idle");
  const app = spawn(
    process.execPath,
    [
      "--input-type=module",
      "-e",
      `import { BatonClient } from ${JSON.stringify(new URL("../dist/index.mjs", import.meta.url).href)};
       const c = await BatonClient.start({ db: ${JSON.stringify(join(dir, "b.db"))}, allowExitOnIdle: true });
       console.log((await c.health()).status);`,
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  let out = "";
  app.stdout.on("data", (c) => (out += c));
  const [code] = await once(app, "exit");
  assert.equal(code, 0);
  assert.equal(out.trim(), "ok");
});
