// Package query projects and filters JSON rows without decoding them: a
// single-pass byte scanner navigates raw documents (Get, Elements,
// AppendElementsAt, Keys, Replace, Delete), builds `_fields` projections
// (Fields), evaluates `_filter` clauses (Filter) and computes
// `_aggregate`s — groups with exact decimal counts, sums, averages,
// minima and maxima (Aggregate) — over the items the looping engine
// merged from every page, so a 24 MB walk is narrowed or totalled
// without ever becoming a tree of Go values.
//
// Paths are dot-separated object keys ("customer.name"); a literal dot or
// backslash in a key is written `\.` or `\\`. In projections and filters a
// path maps over arrays met along the way: "line_items.sku" reaches the sku
// of every line item. Get instead addresses one value and accepts array
// indexes ("data.0.id").
//
// Checking is done once, where it counts. Elements and AppendElementsAt
// check every byte of the array they split; everything the package
// returns, copies into a projection or compares in a filter is checked
// too. Values merely passed by on the way to a key are skipped by their
// strings and brackets alone, about twice as fast as checking them.
// Malformed input gives a
// *SyntaxError (or a non-match), never a panic and never invalid output.
//
// Work on a row is cheapest right after it is checked, while its bytes
// are in cache: a Pass filters and projects each element as
// Pass.AppendElementsAt checks it, page by page, and RunPages later
// answers what Run answers over the rows kept, from that work.
//
//	rows, err := query.AppendElementsAt(nil, page, plan.Items)
//	fields, err := query.CompileFields([]string{"id", "customer.name", "line_items.sku"})
//	filter, err := query.CompileFilter([]query.Clause{{Field: "total", Op: "gte", Value: 100}})
//	out, stats, err := query.Run(rows, fields, filter)
//	view := query.AppendArray(nil, out)
//	spec, err := query.ParseAggregate([]byte(`{"group_by": ["currency"], "metrics": [{"op": "sum", "field": "total"}]}`))
//	agg, err := query.CompileAggregate(spec)
//	groups, err := agg.RunRows(rows)
package query
