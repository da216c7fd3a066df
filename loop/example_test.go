package loop_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/loop/paginate"
	"github.com/trawl-dev/trawl/tools"
)

// An agent asks for every open order's total: the engine walks all three
// pages in one call, filters and projects the merged rows, and says the
// result is complete.
func ExampleEngine_Call() {
	pages := map[string]string{
		"1": `{"data":[{"id":1,"status":"open","total":120},{"id":2,"status":"paid","total":80}],"has_more":true}`,
		"2": `{"data":[{"id":3,"status":"open","total":40},{"id":4,"status":"open","total":300}],"has_more":true}`,
		"3": `{"data":[{"id":5,"status":"open","total":150}],"has_more":false}`,
	}
	upstream := paginate.CallerFunc(func(ctx context.Context, req tools.Request) (*tools.Response, error) {
		page := "1"
		if p, ok := req.Args["page"]; ok {
			page = fmt.Sprint(p) // the walker sets the page it wants
		}
		return &tools.Response{Status: 200, Body: []byte(pages[page])}, nil
	})
	orders := &tools.Tool{
		ID: "acme.list_orders", Provider: "acme", Name: "list_orders", Method: "GET", Path: "/orders",
		Origin: "https://api.acme.example",
		Params: []tools.Param{
			{Name: "page", In: tools.InQuery, Schema: &tools.Schema{Type: "integer"}},
			{Name: "per_page", In: tools.InQuery, Schema: &tools.Schema{Type: "integer"}},
		},
		Response: &tools.Schema{Type: "object", Properties: map[string]*tools.Schema{
			"data": {Type: "array"}, "has_more": {Type: "boolean"}}},
	}
	engine := loop.New(loop.Options{Caller: upstream})
	out, err := engine.Call(context.Background(), loop.Call{
		Tool: orders, Scope: loop.Scope{Org: "acme-co", Thread: "t1"},
		Binding: loop.Binding{LoopResponses: true},
		Args: map[string]any{
			"_all_pages": true,
			"_fields":    []any{"id", "total"},
			"_filter":    []any{map[string]any{"field": "status", "op": "eq", "value": "open"}},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	var view struct {
		Data      json.RawMessage `json:"data"`
		Complete  bool            `json:"_pagingComplete"`
		StoppedBy string          `json:"_stoppedBy"`
		Note      string          `json:"_note"`
	}
	json.Unmarshal(out.View, &view)
	fmt.Println(string(view.Data))
	fmt.Println(view.Complete, view.StoppedBy)
	fmt.Println(view.Note)
	// Output:
	// [{"id":1,"total":120},{"id":3,"total":40},{"id":4,"total":300},{"id":5,"total":150}]
	// true complete_has_more_false
	// Complete: all 5 rows, fetched in 3 pages. 4 of them match the filter.
}
