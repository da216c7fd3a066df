// Package workflow defines workflows — fixed sequences of tool calls with
// the looping capabilities declared once, and forward branches on their
// verdicts — and runs them through the looping engine, streaming each run
// as a chat turn streams (DESIGN.md §10).
//
// # Format
//
// A workflow is a JSON object:
//
//	{
//	  "id": "villa-bookings",
//	  "steps": [
//	    {"id": "properties", "type": "tool", "tool": "acme.list_properties",
//	     "input": {"type": "villa"}, "loop": {"fields": ["id"]}},
//	    {"id": "has_any", "type": "branch",
//	     "if": {"ref": "$.steps.properties.properties", "op": "truthy"},
//	     "then": "bookings", "else": "end"},
//	    {"id": "bookings", "type": "tool", "tool": "acme.list_property_bookings",
//	     "input": {"status": "confirmed"},
//	     "loop": {"all_pages": true, "fields": ["id", "nights"],
//	              "for_each": {"key": "property_id", "values": {"ref": "$.steps.properties.properties.id"}},
//	              "filter": [{"field": "nights", "op": "gte", "value": 7}],
//	              "cache": {"ttl_minutes": 30}}},
//	    {"id": "gate", "type": "branch",
//	     "if": {"ref": "$.steps.bookings._loop.complete", "op": "eq", "value": true},
//	     "then": "end", "else": "stats"},
//	    {"id": "stats", "type": "tool", "tool": "acme.get_stats"}
//	  ]
//	}
//
// Members, all of them checked (an unknown member is an error naming its
// place, e.g. `steps[2] (bookings): loop has an unknown field "all_page"`):
//
//   - id: 1-64 letters, digits, '_' or '-'.
//   - steps: 1 to MaxSteps steps, run in order. A step id starts with a
//     letter or '_', holds at most 64 letters, digits, '_' or '-', is
//     unique, and is not "end".
//   - A "tool" step calls tool (a tool id, "<provider>.<name>") with input
//     (its own parameters; every required one given, unless it is the
//     for_each key) and an optional loop block: all_pages (every page),
//     fields (dot-paths each row is projected to), for_each {key: a
//     parameter of the tool, values: a non-empty list of scalars or a ref},
//     filter ([{field, op, value}], the _filter clauses), cache
//     {ttl_minutes > 0}. These are the reserved arguments _all_pages,
//     _fields, _for_each and _filter of DESIGN.md §5; a tool step always
//     loops, so even without a loop block it gets a verdict. The dataset
//     cache is used only with cache.ttl_minutes, and only for a walk
//     (all_pages or for_each).
//   - A "branch" step has if {ref, op, value} and then/else, each "end" or
//     the id of a LATER step: branches jump forward only, so every run
//     ends. Ops are _filter's, evaluated by loop/query (query.Test), so a
//     branch and a _filter never disagree: eq, neq, gt, gte, lt, lte
//     (numbers as numbers, a numeric string too, other strings
//     byte-wise; an array is tested element by element; neq holds on an
//     absent value), exists (not null; with value false: null), plus
//     truthy (the default when op is absent: not null, false, 0, "", []
//     or {}).
//
// # Outputs and refs
//
// A tool step's output is the tool's payload shape (the primary array
// replaced by the merged, projected, filtered rows; a bare array becomes
// {"items": […]}) with the verdict under one key:
//
//	"_loop": {"complete": true, "completion": "complete", "requests": 5, "itemCount": 361,
//	          "stoppedBy": "complete_total_reached", "note": "Complete: all 361 rows, fetched in 5 pages."}
//
// The block is the engine's typed verdict (loop.Verdict.LoopBlock):
// complete is true only for completion "complete"; completion is also
// "partial", "unstable" or "single_response" (itemCount is then null for
// one object). The loop block itself is read by the engine's parsers
// (loop.FieldsArg, loop.FilterArg) and reaches it as a loop.Request.
//
// There is no _resultId and the output is never cut: nothing downstream
// could redeem a handle, so the walk's byte budget is the only limit. A
// branch's output is {"taken": "then"|"else", "next": "<step id>"|"end"}.
//
// A ref, "$.steps.<id>.<path>", reads an earlier step's output with
// loop/query's paths (query.Collect). Path keys
// are dot-separated (`\.` escapes a dot in a key); on an object a key
// picks a member; on an array a number picks an element and any other key
// maps over the elements, flattening: "$.steps.properties.properties.id"
// is the list of every property's id. A path that reaches nothing, or a
// step that did not run (skipped by a branch), resolves to null. Refs
// appear as a branch's if.ref, as for_each.values ({"ref": …}; it must
// resolve to a non-empty list, nulls dropped, or the step fails), and
// anywhere in input: a string starting with "$.steps." or an object
// {"ref": "$.…"} with no other member is replaced by its value (an input
// member that resolves to null is left out of the call).
//
// # Running
//
//	def, err := workflow.Parse(body)            // strict JSON
//	err = def.Validate(catalog.Get)              // against the tools
//	r := workflow.NewRunner(workflow.RunnerOptions{Engine: engine, Catalog: catalog})
//	res, err := r.Run(ctx, def, workflow.RunInput{Org: "default", RunID: id, Emit: emit})
//
// A run streams the chunks of a chat turn (package stream): start; per
// tool step start-step, tool-input-available {toolCallId: "step_<id>",
// toolName: the tool id, input: the arguments the engine receives,
// reserved ones included, dynamic: true}, data-tool-loop-progress
// (same id, at most one per 750 ms), tool-output-available (or
// tool-output-error), finish-step; per branch data-workflow-branch
// {id: step id, data: {step, taken, next}}; at the end
// data-workflow-result {order, failed?, error?} and finish. A failing
// step ends the run there (finish is still sent); a cancelled context
// ends the stream with abort.
package workflow
