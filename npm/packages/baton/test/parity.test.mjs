// The addon (Engine, in process) and the sidecar (BatonClient over `baton serve`) give the
// same decisions, explanations and rendered documents on every example state under every
// shipped policy, and the same errors.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { BatonClient, BatonError, Engine, ErrorCode } from "../dist/index.js";
import { examples, policies, scratch } from "./helpers.mjs";

const handoffDir = scratch("parity-docs");

for (const policy of policies) {
  describe(`policy ${policy.split("/").pop()}`, () => {
    let client;
    let engine;
    before(async () => {
      client = await BatonClient.start({ policy, handoffDir, db: `${handoffDir}/unused.db`, args: ["--no-watch"] });
      engine = new Engine(policy, { documentRoot: handoffDir });
    });
    after(() => client.close());

    for (const [name, text] of examples) {
      test(name, async () => {
        const viaSidecar = await client.explain({ state_text: text, verbose: true });
        assert.deepEqual(engine.explain(text, { verbose: true }), viaSidecar);
        assert.deepEqual(await engine.explainAsync(text, { verbose: true }), viaSidecar);
        assert.deepEqual(engine.decide(text), viaSidecar.decision);
        assert.deepEqual(await engine.decideAsync(text, { trace: false }), (await client.explain({ state_text: text, trace: false })).decision);
        const rendered = await client.render({ state_text: text });
        assert.deepEqual(engine.render(text), rendered);
        assert.deepEqual(await engine.renderAsync(text), rendered);
      });
    }
  });
}

describe("a state object", () => {
  test("decides and renders as through the sidecar", async (t) => {
    const client = await BatonClient.start({ handoffDir, db: `${handoffDir}/unused.db`, args: ["--no-watch"] });
    t.after(() => client.close());
    const engine = new Engine("default", { documentRoot: handoffDir });
    const state = {
      version: 1,
      thread: { id: "th_1" },
      provider_threads: [{ id: "C1", provider: "codex" }],
      runs: [{ ordinal: 1, provider: "codex", provider_thread: "C1", items: [{ kind: "user_message", text: "Add GitHub OAuth login." }] }],
      request: { provider: "claude" },
    };
    assert.deepEqual(engine.explain(state), await client.explain({ state }));
    assert.deepEqual(await engine.renderAsync(state), await client.render({ state }));
    await client.close();
  });
});

describe("errors are the same", () => {
  let client;
  let engine;
  before(async () => {
    client = await BatonClient.start({ handoffDir, db: `${handoffDir}/unused.db`, args: ["--no-watch"] });
    engine = new Engine("default", { documentRoot: handoffDir });
  });
  after(() => client.close());

  const cases = [
    ["an invalid state text", { state_text: "version: 1\nthread: {id: t}\nruns:\n  - {ordinal: 2, provider: codex}\nrequest: {provider: codex}\n" }],
    ["a state that is not YAML", { state_text: "version: [1\n" }],
    ["an invalid state object", { state: { version: 1, thread: { id: "t" }, request: { provider: 5 } } }],
    ["an unknown target", { state_text: "version: 1\nthread: {id: t}\nrequest: {provider: codex}\n", target: "nobody" }],
  ];
  for (const [what, params] of cases) {
    test(what, async () => {
      const fromSidecar = await client.explain(params).then(
        () => assert.fail("the sidecar accepted it"),
        (e) => e,
      );
      assert.ok(fromSidecar instanceof BatonError);
      const state = params.state ?? params.state_text;
      const fromAddon = (() => {
        try {
          engine.explain(state, { target: params.target });
        } catch (e) {
          return e;
        }
        assert.fail("the addon accepted it");
      })();
      assert.ok(fromAddon instanceof BatonError);
      assert.deepEqual(
        { code: fromAddon.code, message: fromAddon.message, data: fromAddon.data },
        { code: fromSidecar.code, message: fromSidecar.message, data: fromSidecar.data },
      );
      const asyncErr = await engine.explainAsync(state, { target: params.target }).then(
        () => assert.fail("accepted"),
        (e) => e,
      );
      assert.equal(asyncErr.code, fromSidecar.code);
      assert.ok([ErrorCode.StateError, ErrorCode.InvalidParams].includes(fromSidecar.code), fromSidecar.message);
    });
  }
});
