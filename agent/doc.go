// Package agent runs agents: their definitions and tool bindings, threads,
// and the step loop that streams a model's answer, runs its tool calls
// through the looping engine, and repeats until the model answers without
// tool calls or the step budget is spent.
package agent
