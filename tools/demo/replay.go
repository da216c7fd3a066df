package demo

import _ "embed"

//go:embed replay.json
var replayScript []byte

// ReplayScript is the demo conversation the replay model plays when trawl
// runs without a model key: an agent answering real questions over the
// Acme API with _all_pages, _fields, _filter, _for_each and a
// queryToolResult, while the tools run live.
func ReplayScript() []byte { return replayScript }

//go:embed eval.jsonl
var evalDataset []byte

// EvalDataset is the demo's evaluation dataset (trawl eval
// tools/demo/eval.jsonl; POST /v1/evals {"dataset": "demo"}): the
// recorded questions with expectations, every transcript inline.
func EvalDataset() []byte { return evalDataset }
