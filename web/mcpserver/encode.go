package mcpserver

import (
	"bytes"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// encodedResult is a tools/call result as the SDK sends it, encoded with
// one pass over its content less. The SDK encodes a result three times
// over: the result's own MarshalJSON (json.Marshal, which compacts and
// re-validates the bytes of every content and of structuredContent), then
// the JSON-RPC result and the JSON-RPC message, each of which compacts
// and re-validates all of it again. On a looping call the envelope is
// there twice (structuredContent, and the text the client's model reads),
// so that first pass is tens of kilobytes. encodedResult's MarshalJSON
// writes the same object from the SDK's own encodings — each content's
// MarshalJSON, and the result's MarshalJSON without its content and
// structuredContent for every other field (_meta, isError, resultType…) —
// with structuredContent's bytes as they are; the SDK's two layers after
// it still compact and validate every byte. What a client receives is the
// same JSON (the one difference in bytes: '<', '>' and '&' inside
// structuredContent's strings are not turned into \u003c and the like,
// which the SDK's own layers do not do either).
//
// It embeds the result, so the SDK's handling of a result after the
// middleware (the result type, the server's _meta) reaches it.
type encodedResult struct{ *mcp.CallToolResult }

// contentNull is how the result without its content encodes that field.
const contentNull = `"content":null`

func (r encodedResult) MarshalJSON() ([]byte, error) {
	res := r.CallToolResult
	raw, _ := res.StructuredContent.(json.RawMessage)
	if res.StructuredContent != nil && len(raw) == 0 || res.InputRequests != nil {
		return res.MarshalJSON() // not what trawl's calls return
	}
	rest := *res
	rest.Content, rest.StructuredContent = nil, nil
	b, err := rest.MarshalJSON()
	if err != nil {
		return nil, err
	}
	// The top-level key is the last: the fields after content are
	// scalars (isError, requestState, resultType), and a key inside a
	// string is escaped.
	i := bytes.LastIndex(b, []byte(contentNull))
	if i < 0 {
		return res.MarshalJSON()
	}
	parts := make([][]byte, len(res.Content))
	n := len(b) + len(raw) + len(`,"structuredContent":[]`)
	for j, c := range res.Content {
		if parts[j], err = c.MarshalJSON(); err != nil {
			return nil, err
		}
		n += len(parts[j]) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, b[:i]...)
	out = append(out, `"content":[`...)
	for j, p := range parts {
		if j > 0 {
			out = append(out, ',')
		}
		out = append(out, p...)
	}
	out = append(out, ']')
	if len(raw) > 0 {
		out = append(out, `,"structuredContent":`...)
		out = append(out, raw...)
	}
	return append(out, b[i+len(contentNull):]...), nil
}
