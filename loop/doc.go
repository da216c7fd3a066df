// Package loop is trawl's looping engine. Every tool call an agent, a
// workflow or the invoke endpoint makes goes through an Engine, which
// strips the reserved arguments (_fields, _all_pages, _for_each, _filter,
// _refresh), walks every page and fans out over values via the tools
// invoker, projects and filters the merged rows, guards the size of what the
// model will see, keeps the full payload aside under a result id, caches
// complete walks per credential scope, and reports progress.
//
// The result is the tool's own payload shape plus the envelope keys of
// DESIGN.md §5 (_pagingComplete, _likelyMoreRows, _stoppedBy, _note,
// _boundary, _resultId, …) so that a partial answer can never pass for a
// complete one.
package loop
