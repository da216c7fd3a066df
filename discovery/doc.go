// Package discovery decides which tools an agent's model is given directly
// and which wait in a pool behind two meta-tools, search_tools and
// load_tool; it provides the full-text index that search_tools ranks with
// and the two meta-tools' argument parsing, answers, descriptions and
// input schemas.
//
// A model chooses worse from a long tool list, and connected-app toolkits
// can be large (a mail toolkit alone has seventy tools). Assemble keeps at
// most 15 connected-app tools in front of the model (the budget is
// configurable): toolkits stay whole, smallest first, while they fit; the
// first that does not fit, and every larger one, is pooled. A binding can
// force its tools into the pool (ModePooled) or in front of the model
// (ModeDirect, counted against the budget). Own API and MCP tools are
// never pooled. Tools the thread loaded with load_tool join the direct
// list on top of the budget, so loading never takes a tool away.
//
// The Index holds the pooled tools in memory (bleve, BM25 scoring): names
// split into words, descriptions with English stemming, toolkit text and
// parameters, weighted in that order; a small thesaurus of business-app
// vocabulary widens queries, and a typo fallback allows one edit per word
// when nothing matches. BM25's best hits are ranked again by the action
// the query asks for (action.go: "move my 3 pm" asks for an update), by
// how much the query is about each toolkit, and, among near-ties, for
// the general tool over its specialised variants. Each hit says why it
// matched. Optionally (IndexOptions.Semantic) tools and queries are
// embedded and the cosine ranking fused with BM25's by reciprocal rank
// fusion; any embeddings failure leaves BM25 alone, logged. An Index is
// immutable: build a new one when the pooled toolkits change (about
// 0.1 s for 1,000 tools) and Close the old.
//
// testdata holds three labelled query sets: queries.json and tuning.json,
// which the weights were tuned on, and heldout.json, in users' words,
// which was not (see ranking_test.go).
//
// One step of a runner, in outline:
//
//	a := discovery.Assemble(entries, thread.Loaded, discovery.AssembleOptions{DirectBudget: cfg.DirectBudget})
//	ix, err := discovery.NewIndex(a.Pool) // once per agent and pool, not per step
//	…
//	offer(a.Direct, a.MetaTools()) // the tools and meta-tools the model sees
//	…
//	switch call.Name {
//	case discovery.MetaSearchTools:
//		out, err = ix.SearchTool(ctx, call.Args, thread.IsLoaded)
//	case discovery.MetaLoadTool:
//		var toLoad []*tools.Tool
//		toLoad, out, err = discovery.LoadTool(call.Args, a.Pool, ix)
//		thread.Loaded = append(thread.Loaded, ids(toLoad)...) // callable from the next step
//	}
//
// Errors from SearchTool and LoadTool are written for the model that made
// the call (ErrInvalidArguments, ErrUnknownToolkit, *UnknownToolError):
// hand their text back as the tool result.
package discovery
