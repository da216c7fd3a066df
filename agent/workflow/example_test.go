package workflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/trawl-dev/trawl/agent/workflow"
	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/tools"
	"github.com/trawl-dev/trawl/tools/demo"
)

// A workflow that lists the guesthouses, walks every page of their bookings,
// and branches on whether that walk was complete.
func ExampleRunner_Run() {
	srv := demo.NewServer(demo.Options{})
	base, err := srv.Start("127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ts, err := tools.ImportOpenAPIData(demo.Spec(), tools.ImportOptions{ProviderID: "acme", BaseURL: base})
	if err != nil {
		log.Fatal(err)
	}
	catalog := tools.NewCatalog()
	if err := catalog.Add(ts...); err != nil {
		log.Fatal(err)
	}
	engine := loop.New(loop.Options{Caller: tools.NewInvoker(tools.InvokerOptions{})})

	def, err := workflow.Parse([]byte(`{
	  "id": "guesthouse-bookings",
	  "steps": [
	    {"id": "guesthouses", "type": "tool", "tool": "acme.list_properties",
	     "input": {"type": "guesthouse"}, "loop": {"fields": ["id"]}},
	    {"id": "bookings", "type": "tool", "tool": "acme.list_property_bookings",
	     "loop": {"all_pages": true, "fields": ["id", "nights"],
	              "for_each": {"key": "property_id", "values": {"ref": "$.steps.guesthouses.properties.id"}},
	              "filter": [{"field": "nights", "op": "gte", "value": 10}]}},
	    {"id": "gate", "type": "branch",
	     "if": {"ref": "$.steps.bookings._loop.complete", "op": "eq", "value": true},
	     "then": "end", "else": "stats"},
	    {"id": "stats", "type": "tool", "tool": "acme.get_stats"}
	  ]
	}`))
	if err != nil {
		log.Fatal(err)
	}
	if err := def.Validate(catalog.Get); err != nil {
		log.Fatal(err)
	}

	runner := workflow.NewRunner(workflow.RunnerOptions{Engine: engine, Catalog: catalog})
	var types []string
	res, err := runner.Run(context.Background(), def, workflow.RunInput{
		Org: "default", RunID: "run_1",
		Emit: func(c stream.Chunk) error {
			if c.Type() != "data-tool-loop-progress" { // throttled by time: how many varies
				types = append(types, c.Type())
			}
			return nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	var bookings struct {
		Loop struct {
			Complete  bool   `json:"complete"`
			Requests  int    `json:"requests"`
			ItemCount int    `json:"itemCount"`
			StoppedBy string `json:"stoppedBy"`
		} `json:"_loop"`
	}
	if err := json.Unmarshal(res.Steps["bookings"], &bookings); err != nil {
		log.Fatal(err)
	}
	fmt.Println("order:", res.Order)
	fmt.Printf("bookings: %+v\n", bookings.Loop)
	fmt.Println("gate:", string(res.Steps["gate"]))
	fmt.Println(types)
	// Output:
	// order: [guesthouses bookings gate]
	// bookings: {Complete:true Requests:8 ItemCount:16 StoppedBy:complete_total_reached}
	// gate: {"taken":"then","next":"end"}
	// [start start-step tool-input-available tool-output-available finish-step start-step tool-input-available tool-output-available finish-step data-workflow-branch data-workflow-result finish]
}

// Parse and Validate name the step and the field at fault.
func ExampleDefinition_Validate() {
	catalog := tools.NewCatalog()
	ts, err := tools.ImportOpenAPIData(demo.Spec(), tools.ImportOptions{ProviderID: "acme", BaseURL: "http://acme.invalid"})
	if err != nil {
		log.Fatal(err)
	}
	if err := catalog.Add(ts...); err != nil {
		log.Fatal(err)
	}
	def, err := workflow.Parse([]byte(`{"id": "w", "steps": [
	  {"id": "props", "type": "tool", "tool": "acme.list_properties"},
	  {"id": "fetch", "type": "tool", "tool": "acme.list_property_bookings",
	   "loop": {"for_each": {"key": "property", "values": {"ref": "$.steps.props.properties.id"}}}},
	  {"id": "gate", "type": "branch", "if": {"ref": "$.steps.fetch._loop.complete"}, "then": "props", "else": "end"}]}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(def.Validate(catalog.Get))

	_, err = workflow.Parse([]byte(`{"id": "w", "steps": [{"id": "fetch", "type": "tool", "loop": {"all_page": true}}]}`))
	fmt.Println(err)
	// Output:
	// steps[1] (fetch): loop.for_each.key "property" is not a parameter of acme.list_property_bookings; parameters: page, per_page, property_id, status; steps[1] (fetch): input is missing "property_id", a required parameter of acme.list_property_bookings (give it in input, or fan out over it with loop.for_each); steps[2] (gate): then "props" is not after this step; branches jump forward only (to a later step or "end"), so that every run ends
	// steps[0] (fetch): loop has an unknown field "all_page" (known: aggregate, all_pages, cache, fields, filter, for_each)
}
