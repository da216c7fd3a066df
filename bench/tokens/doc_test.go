// Package tokens_test measures what the model reads (issue 27, "Measure
// the economy"; figures in bench/README.md, "Tokens sent to the model"):
// the demo's two questions answered by a scripted model through trawl's
// real chat endpoint, with looping on — the demo's own calls (_all_pages,
// _fields, _filter, _for_each, _aggregate, queryToolResult), and the
// answer the looping guidance asks for, every count an _aggregate — and
// with looping off, the model paging by hand as a model does, page after
// page until the last. Each run checks the figures it answers with
// against what it was sent. Every request trawl sends the model is counted, in
// characters and in tokens of the model's own tokenizer (o200k_base,
// agent.TokenizerFor), over every step of the task.
package tokens_test
