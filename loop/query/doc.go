// Package query projects and filters JSON rows without decoding them: a
// single-pass byte scanner navigates raw documents (Get, Elements, Keys,
// Replace, Delete), builds `_fields` projections (Fields) and evaluates
// `_filter` clauses (Filter) over the items the looping engine merged from
// every page, so a 24 MB walk is narrowed without ever becoming a tree of
// Go values.
//
// Paths are dot-separated object keys ("customer.name"); a literal dot or
// backslash in a key is written `\.` or `\\`. In projections and filters a
// path maps over arrays met along the way: "line_items.sku" reaches the sku
// of every line item. Get instead addresses one value and accepts array
// indexes ("data.0.id").
//
// Everything the package returns or copies has been checked as JSON;
// malformed input gives a *SyntaxError, never a panic.
//
//	fields, _ := query.CompileFields([]string{"id", "customer.name", "line_items.sku"})
//	filter, _ := query.CompileFilter([]query.Clause{{Field: "total", Op: "gte", Value: 100}})
//	items, _ := query.Elements(page)
//	out, stats, err := query.Run(items, fields, filter)
package query
