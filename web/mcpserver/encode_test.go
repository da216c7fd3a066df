package mcpserver

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// encodedResult writes the JSON the SDK's own encoding of the result
// writes, for the results trawl returns and for those it falls back on.
func TestEncodedResultIsTheSDKs(t *testing.T) {
	envelope := `{"data":[{"id":"ord_1","note":"<b>a & b</b>\u2028"}], "_note":"Complete: all 1 rows.",` + "\n\t" +
		`"_boundary":{"scope":"list_orders","lastCursor":null,"content":null}}`
	for name, wire := range map[string]string{
		"looping result": `{"_meta":{"trawl/thread":"default","io.modelcontextprotocol/serverInfo":{"name":"trawl","version":"dev"}},` +
			`"content":[{"type":"text","text":` + quoteJSON(envelope) + `}],"structuredContent":` + envelope + `,"resultType":"complete"}`,
		"interrupted calls in _meta": `{"_meta":{"trawl/thread":"t","trawl/interrupted":[{"tool":"list_orders","content":null,"note":"\"content\":null"}]},` +
			`"content":[{"type":"text","text":"{}"},{"type":"text","text":"An earlier call was cancelled."}],"structuredContent":{}}`,
		"tool error":  `{"content":[{"type":"text","text":"invalid_argument: status must be a string"}],"isError":true,"resultType":"complete"}`,
		"image":       `{"content":[{"type":"text","text":"a chart, attached"},{"type":"image","mimeType":"image/png","data":"iVBORw0KGgo="}]}`,
		"no content":  `{"content":[],"structuredContent":[1,2]}`,
		"scalar":      `{"content":[],"structuredContent":3}`,
		"input asked": `{"inputRequests":{"approval":{"method":"elicitation/create","params":{"mode":"form","message":"Approve?","requestedSchema":{"type":"object"}}}},"requestState":"ap_1","resultType":"input_required"}`,
	} {
		var res mcp.CallToolResult
		if err := json.Unmarshal([]byte(wire), &res); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.StructuredContent != nil {
			// As trawl returns it: the envelope's bytes.
			b, _ := json.Marshal(res.StructuredContent)
			if name == "looping result" {
				b = []byte(envelope)
			}
			res.StructuredContent = json.RawMessage(b)
		}
		sdk, err := res.MarshalJSON()
		if err != nil {
			t.Fatalf("%s: the SDK's encoding: %v", name, err)
		}
		ours, err := json.Marshal(encodedResult{&res})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var a, b any
		if err := json.Unmarshal(sdk, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(ours, &b); err != nil {
			t.Fatalf("%s: not JSON: %v: %s", name, err, ours)
		}
		if d := cmp.Diff(a, b); d != "" {
			t.Errorf("%s: not the SDK's result (-sdk +ours):\n%s\nsdk:  %s\nours: %s", name, d, sdk, ours)
		}
	}
}

func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
