package query_test

import (
	"fmt"

	"github.com/trawl-dev/trawl/loop/query"
)

func ExampleGet() {
	page := []byte(`{"ok":true,"members":[{"id":"U1"},{"id":"U2"}],"response_metadata":{"next_cursor":"dXNlcjpVMEc5"}}`)
	cursor, _ := query.Get(page, "response_metadata.next_cursor")
	last, _ := query.Get(page, "members.1.id")
	_, ok := query.Get(page, "response_metadata.prev_cursor")
	fmt.Println(string(cursor), string(last), ok)
	// Output: "dXNlcjpVMEc5" "U2" false
}

func ExampleReplace() {
	first := []byte(`{"data":[1,2],"has_more":true}`)
	merged := query.AppendArray(nil, [][]byte{[]byte("1"), []byte("2"), []byte("3")})
	doc, err := query.Replace(first, "data", merged)
	if err != nil {
		panic(err)
	}
	doc, _ = query.Delete(doc, "has_more")
	fmt.Println(string(doc))
	// Output: {"data":[1,2,3]}
}

func ExampleFields_Project() {
	fields, err := query.CompileFields([]string{"id", "customer.name", "line_items.sku", "shipping"})
	if err != nil {
		panic(err)
	}
	item := []byte(`{"id":7,"customer":{"name":"Ann","email":"a@x"},"line_items":[{"sku":"A","qty":1},{"sku":"B"}]}`)
	matched := make([]bool, 4)
	out, err := fields.Project(item, nil, matched)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(out))
	fmt.Println(matched)
	// Output:
	// {"id":7,"customer":{"name":"Ann"},"line_items":[{"sku":"A"},{"sku":"B"}],"shipping":null}
	// [true true true false]
}

func ExampleCompileFilter() {
	filter, err := query.CompileFilter([]query.Clause{
		{Field: "status", Op: "in", Value: []any{"paid", "shipped"}},
		{Field: "line_items.qty", Op: "gte", Value: 5},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(filter.Match([]byte(`{"status":"paid","line_items":[{"qty":1},{"qty":6}]}`)))
	fmt.Println(filter.Match([]byte(`{"status":"open","line_items":[{"qty":9}]}`)))

	_, err = query.CompileFilter([]query.Clause{{Field: "total", Op: "greater", Value: 10}})
	fmt.Println(err)
	// Output:
	// true
	// false
	// query: filter clause 0 {"field":"total","op":"greater","value":10}: unknown op "greater" (valid ops: eq, neq, gt, gte, lt, lte, contains, in, exists)
}

func ExampleRun() {
	page := []byte(`[{"id":1,"total":"120.00","note":"rush"},{"id":2,"total":80},{"id":3,"total":300}]`)
	rows, err := query.Elements(page)
	if err != nil {
		panic(err)
	}
	fields, _ := query.CompileFields([]string{"id", "totl"})
	filter, _ := query.ParseFilter([]byte(`{"field":"total","op":"gt","value":100}`))
	out, stats, err := query.Run(rows, fields, filter)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(query.AppendArray(nil, out)))
	fmt.Printf("%d of %d kept; unmatched %q\n", stats.Kept, stats.Rows, stats.Unmatched)
	// Output:
	// [{"id":1,"totl":null},{"id":3,"totl":null}]
	// 2 of 3 kept; unmatched ["totl"]
}

func ExampleAggregate() {
	spec, err := query.ParseAggregate([]byte(`{"group_by": ["currency"],
		"metrics": [{"op": "count"}, {"op": "sum", "field": "total"}]}`))
	if err != nil {
		panic(err)
	}
	agg, err := query.CompileAggregate(spec)
	if err != nil {
		panic(err)
	}
	rows := [][]byte{
		[]byte(`{"currency": "EUR", "total": 0.1}`),
		[]byte(`{"currency": "EUR", "total": 0.2}`),
		[]byte(`{"currency": "USD", "total": "12.50"}`),
		[]byte(`{"currency": "USD", "total": null}`),
	}
	res, err := agg.RunRows(rows)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(res.AppendJSON(nil, nil, 0)))
	// Output: {"rows":4,"groupBy":["currency"],"groupCount":2,"groups":[{"currency":"EUR","count":2,"sum(total)":"0.3"},{"currency":"USD","count":2,"sum(total)":"12.50","_skipped":{"sum(total)":{"null":1,"missing":0,"not_a_number":0}}}],"skipped":{"sum(total)":{"null":1,"missing":0,"not_a_number":0}},"numericStrings":{"sum(total)":1}}
}
