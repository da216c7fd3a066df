// Package eval runs datasets of conversations against a deployment's
// agents and says what a run got right and what changed: `trawl eval`
// and POST /v1/evals are this package over a deploy.Deployment
// (Target).
//
// A dataset is JSONL, one Case a line (ParseDataset, LoadDataset). Each
// case runs as an experiment (no cache reads, writes refused unless
// Options.AllowWrites) on the replay model (its transcript) or the
// configured live model, Options.Repeat times. Every sample gets the
// honesty checks — unsupported_claim, through agent.CheckAnswer (the
// one claim check of agent/claims), and verdict_changed against the
// transcript's recorded verdicts — and one check per expectation the
// case sets (Expect). The Report is written as report.json and as JUnit
// XML, printed as a table, and compared with a baseline report
// (Report.Compare). Upstream records the tools' responses of a run and
// serves them back to a later one, so a difference between two runs is
// the configuration's, not the data's.
package eval
