# The strategy decision of baton's shipped `default` policy (policies/default.policy), written
# in Rego for benches/versus.rs and tests/rego_agreement.rs.
#
# input:
#   state   the thread state as baton serialises it (baton::State), with one addition per run:
#           `chars`, the run's rough summary size (what baton's RoughSizer counts: every item
#           but reasoning and protocol noise), since Rego has no notion of an item's length
#   target  the provider the next run starts on
#   caps    the target's resolved capabilities (baton::state::caps_for)
#
# output (data.baton.decision): {strategy, stale, delivery}.
package baton

import rego.v1

state := input.state

target := input.target

caps := input.caps

# eligible when run.status in ["completed", "failed", "interrupted"]
# (a rolled-back run is never eligible)
eligible_status := {"completed", "failed", "interrupted"}

eligible contains run.ordinal if {
	some run in state.runs
	run.status in eligible_status
}

eligible_count := count(eligible)

live(o) if {
	run := state.runs[o - 1]
	run.status != "rolled_back"
}

# The provider thread the target resumes: the one the newest run on an open thread of the
# provider used, else the last open one declared. A fork's first run resumes none.
closed contains pt.id if {
	some pt in state.provider_threads
	pt.provider == target
	pt.status == "closed"
}

open_threads := [pt | some pt in state.provider_threads; pt.provider == target; pt.status != "closed"]

used_ordinals contains run.ordinal if {
	some run in state.runs
	run.provider == target
	object.get(run, "provider_thread", null) != null
	not run.provider_thread in closed
}

is_fork_request if {
	object.get(state.request, "kind", "run") == "fork"
	object.get(state.thread, "parent", null) != null
}

target_thread := pt if {
	not is_fork_request
	count(used_ordinals) > 0
	id := state.runs[max(used_ordinals) - 1].provider_thread
	some pt in open_threads
	pt.id == id
} else := open_threads[count(open_threads) - 1] if {
	not is_fork_request
	count(used_ordinals) == 0
	count(open_threads) > 0
}

has_thread if target_thread

# Coverage of the target thread: its eligible native runs, and the live handoffs into it.
native contains run.ordinal if {
	some run in state.runs
	object.get(run, "provider_thread", null) == target_thread.id
	run.ordinal in eligible
	live(run.ordinal)
}

last_native := max(native) if {
	count(native) > 0
} else := 0

live_handoffs := [h |
	some h in state.handoffs
	h.status == "ready"
	object.get(h, "to_provider_thread", null) == target_thread.id
]

own_handoff_tops contains top if {
	some h in live_handoffs
	object.get(h, "covered_thread", null) in {null, state.thread.id}
	tops := {o | some o in numbers.range(h.covered.from, h.covered.to); live(o)}
	count(tops) > 0
	top := max(tops)
}

last_seen := max(own_handoff_tops | {last_native})

delta contains o if {
	some o in eligible
	o > last_seen
}

runs_since_last_seen := count(delta)

# A provider that never had a thread here has nothing to go stale: 0.
off_provider_runs := count({run.ordinal |
	some run in state.runs
	run.ordinal > last_native
	run.ordinal in eligible
	run.provider != target
}) if {
	has_thread
} else := 0

clean_natives := {o | some o in native; object.get(state.runs[o - 1], "handoff", null) == null}

last_clean := max(clean_natives) if {
	count(clean_natives) > 0
} else := 0

chained_handoffs := count([h |
	some h in live_handoffs
	object.get(h, "target_run", null) != null
	h.target_run > last_clean
]) + count([h |
	some h in live_handoffs
	object.get(h, "target_run", null) == null
	h.covered.to + 1 > last_clean
])

delta_chars := sum([state.runs[o - 1].chars | some o in delta])

request := state.request

# Staleness signals, in policy order.
signal("too_many_off_provider_runs") if off_provider_runs > 12

signal("too_many_chained_handoffs") if chained_handoffs >= 3

signal("model_changed") if {
	has_thread
	request.provider == target
	object.get(request, "model", null) != null
	object.get(target_thread, "model", null) != null
	target_thread.model != request.model
}

signal("runtime_mode_changed") if {
	has_thread
	request.provider == target
	object.get(request, "runtime_mode", null) != null
	object.get(target_thread, "runtime_mode", null) != null
	target_thread.runtime_mode != request.runtime_mode
}

signal("resume_failed") if object.get(target_thread, "resume_failed", false) == true

signal("diverged") if object.get(target_thread, "status", "active") in {"divergent", "rolled_back"}

signal("clean_context") if object.get(request, "clean_context", false) == true

# let document_max = 60_000: a delta sent inline binds to the per-turn input, one sent
# off-band (the target reads files) to the document limit.
document_max := 60000

delta_over_budget if {
	not caps.file_read
	delta_chars > caps.max_input_chars_per_turn
}

delta_over_budget if delta_chars > document_max

signal("over_budget") if {
	has_thread
	runs_since_last_seen > 0
	delta_over_budget
}

# The workspace: the target thread's last run (not rolled back) against the request.
target_last_run := state.runs[max({run.ordinal |
	some run in state.runs
	run.status != "rolled_back"
	object.get(run, "provider_thread", null) == target_thread.id
}) - 1]

trim_dir(p) := t if {
	t := trim_right(p, "/")
	t != ""
} else := p

signal("cwd_changed") if {
	then := target_last_run.workspace.cwd
	now := state.request.workspace.cwd
	trim_dir(then) != trim_dir(now)
}

signal("branch_changed") if {
	then := target_last_run.workspace.git.branch
	now := state.request.workspace.git.branch
	then != now
}

signal_names := [
	"too_many_off_provider_runs", "too_many_chained_handoffs", "model_changed",
	"runtime_mode_changed", "resume_failed", "diverged", "clean_context", "over_budget",
	"cwd_changed", "branch_changed",
]

stale := [name | some name in signal_names; signal(name)]

any_stale if count(stale) > 0

fork_source := state.runs[state.thread.parent.run - 1]

fork_native_possible if {
	fork_source.provider == target
	caps.native_fork
	some pt in state.provider_threads
	pt.id == fork_source.provider_thread
	object.get(pt, "status", "active") == "active"
	object.get(pt, "resume_failed", false) == false
}

# The ladder: first match wins.
strategy := "native_fork" if {
	object.get(request, "kind", "run") == "fork"
	fork_native_possible
} else := "no_handoff" if {
	has_thread
	runs_since_last_seen == 0
	not any_stale
} else := "unsupported" if {
	not caps.accepts_handoff
	eligible_count > 0
} else := "full_new" if {
	not has_thread
} else := "full_new" if {
	any_stale
} else := "full_new" if {
	not caps.resume
} else := "delta_existing" if {
	chained_handoffs < 2
} else := "full_existing"

delivery := "off_band" if {
	caps.file_read
} else := "inline"

decision := {"strategy": strategy, "stale": stale, "delivery": delivery}
