package discovery_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/trawl-dev/trawl/discovery"
	"github.com/trawl-dev/trawl/tools"
	"github.com/trawl-dev/trawl/tools/demo"
)

// demoEntries binds the four demo toolkits, each whole and in auto mode.
func demoEntries() []discovery.Entry {
	manifests := demo.Manifests("http://127.0.0.1:1")
	var entries []discovery.Entry
	for _, id := range []string{"mail", "crm", "calendar", "chat"} {
		m, err := tools.ParseManifest(manifests[id])
		if err != nil {
			panic(err)
		}
		ts, err := m.Tools()
		if err != nil {
			panic(err)
		}
		entries = append(entries, discovery.Entry{Tools: ts, Toolkit: m.Toolkit})
	}
	return entries
}

func Example() {
	entries := demoEntries() // mail 70 tools, crm 15, calendar 8, chat 3

	// Chat and calendar (3 + 8) fit the budget of 15; crm (15) does not,
	// so it goes to the pool with mail.
	a := discovery.Assemble(entries, nil, discovery.AssembleOptions{})
	fmt.Println(len(a.Direct), "direct,", len(a.Pool), "pooled, meta-tools:", a.Meta)

	ix, err := discovery.NewIndex(a.Pool)
	if err != nil {
		panic(err)
	}
	defer ix.Close()

	// The model searches the pool…
	out, err := ix.SearchTool(context.Background(), json.RawMessage(`{"query":"set an out-of-office reply","limit":2}`), nil)
	if err != nil {
		panic(err)
	}
	var found struct {
		Results []struct{ Name string }
	}
	json.Unmarshal(out, &found)
	fmt.Println("found:", found.Results[0].Name, found.Results[1].Name)

	// …loads what it needs…
	toLoad, _, err := discovery.LoadTool(json.RawMessage(`{"toolName":"MAIL_UPDATE_VACATION_SETTINGS"}`), a.Pool, ix)
	if err != nil {
		panic(err)
	}
	loaded := []string{toLoad[0].ID} // the runner keeps these per thread

	// …and from the next step on the tool is in front of it.
	a = discovery.Assemble(entries, loaded, discovery.AssembleOptions{})
	fmt.Println(len(a.Direct), "direct, the last:", a.Direct[len(a.Direct)-1].Name)

	// Output:
	// 11 direct, 85 pooled, meta-tools: [search_tools load_tool list_connections connect_toolkit]
	// found: MAIL_UPDATE_VACATION_SETTINGS MAIL_GET_VACATION_SETTINGS
	// 12 direct, the last: MAIL_UPDATE_VACATION_SETTINGS
}

// A name no pooled tool has is an error for the model, with the closest
// names to try.
func ExampleLoadTool_unknownName() {
	a := discovery.Assemble(demoEntries(), nil, discovery.AssembleOptions{})
	ix, err := discovery.NewIndex(a.Pool)
	if err != nil {
		panic(err)
	}
	defer ix.Close()
	_, _, err = discovery.LoadTool(json.RawMessage(`{"toolName":"CRM_GET_DEALS"}`), a.Pool, ix)
	fmt.Println(err)
	// Output:
	// no tool named "CRM_GET_DEALS" to load; the closest names are CRM_GET_DEAL, CRM_LIST_DEALS, CRM_UPDATE_DEAL, CRM_CREATE_DEAL, CRM_CREATE_CONTACT; nothing was loaded
}
