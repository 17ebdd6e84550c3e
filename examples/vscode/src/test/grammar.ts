// The TextMate grammar (syntaxes/baton-policy.tmLanguage.json) on a real policy, through the
// tokenizer VS Code itself uses (vscode-textmate with the Oniguruma regex engine): each kind
// of token gets its scope.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import * as tm from "vscode-textmate";
import * as onig from "vscode-oniguruma";

const here = resolve(__dirname, "../..");

export async function checkGrammar(): Promise<void> {
  const wasm = readFileSync(require.resolve("vscode-oniguruma/release/onig.wasm"));
  await onig.loadWASM(wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength));
  const registry = new tm.Registry({
    onigLib: Promise.resolve({
      createOnigScanner: (patterns: string[]) => new onig.OnigScanner(patterns),
      createOnigString: (s: string) => new onig.OnigString(s),
    }),
    loadGrammar: async () =>
      tm.parseRawGrammar(
        readFileSync(resolve(here, "syntaxes/baton-policy.tmLanguage.json"), "utf8"),
        "baton-policy.tmLanguage.json",
      ),
  });
  const grammar = await registry.loadGrammar("source.baton-policy");
  assert.ok(grammar);
  const text = `policy "team" { extends "default" }
# why we wait
let patience = 30
stale slow when target.off_provider_runs > patience because "away too long"
strategy {
  full_new when stale or summary.delta_chars >= 32_000
  delta_existing otherwise
}
`;
  // Each line's tokens, to look up the scopes at a word's first character.
  const lines: { line: string; tokens: tm.IToken[] }[] = [];
  let state = tm.INITIAL;
  for (const line of text.split("\n")) {
    const r = grammar.tokenizeLine(line, state);
    state = r.ruleStack;
    lines.push({ line, tokens: r.tokens });
  }
  const scopesOf = (word: string): string[] => {
    for (const { line, tokens } of lines) {
      const at = line.indexOf(word);
      if (at < 0) continue;
      const t = tokens.find((t) => t.startIndex <= at && at < t.endIndex);
      return t?.scopes ?? [];
    }
    return [];
  };
  const expect: [string, string][] = [
    ["policy", "storage.type.block.baton-policy"],
    ["\"default\"", "string.quoted.double.baton-policy"],
    ["extends", "keyword.control.baton-policy"],
    ["# why we wait", "comment.line.number-sign.baton-policy"],
    ["let", "storage.type.baton-policy"],
    ["patience", "entity.name.variable.baton-policy"],
    ["30", "constant.numeric.integer.baton-policy"],
    ["32_000", "constant.numeric.integer.baton-policy"],
    ["target.off_provider_runs", "variable.other.property.fact.baton-policy"],
    ["summary.delta_chars", "variable.other.property.fact.baton-policy"],
    [">=", "keyword.operator.baton-policy"],
    ["or", "keyword.operator.baton-policy"],
    ["full_new", "support.constant.strategy.baton-policy"],
    ["otherwise", "keyword.control.baton-policy"],
    ["slow", "entity.name.variable.baton-policy"],
  ];
  for (const [word, scope] of expect) {
    const got = scopesOf(word);
    assert.ok(got.includes(scope), `${word}: ${got.join(" ")}, expected ${scope}`);
  }
  // The shipped policy: no string runs past its line, so every comment line is a comment.
  const shipped = readFileSync(resolve(here, "../../policies/default.policy"), "utf8");
  state = tm.INITIAL;
  let comments = 0;
  for (const line of shipped.split("\n")) {
    const r = grammar.tokenizeLine(line, state);
    state = r.ruleStack;
    const at = line.indexOf("#");
    if (line.trimStart().startsWith("#")) {
      const t = r.tokens.find((t) => t.startIndex <= at && at < t.endIndex);
      assert.ok(t?.scopes.includes("comment.line.number-sign.baton-policy"), line);
      comments += 1;
    }
  }
  assert.ok(comments > 0);
}
