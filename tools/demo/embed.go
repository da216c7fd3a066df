package demo

import (
	"bytes"
	"embed"
	"strings"
)

//go:embed acme.yaml
var acmeSpec []byte

// Spec returns the OpenAPI 3.0 document (YAML) describing the Acme API the
// server answers at its root. Its servers entry names a placeholder host;
// callers point the provider's base URL at the running server. The slice
// is a fresh copy.
func Spec() []byte { return bytes.Clone(acmeSpec) }

//go:embed toolkits/*.json
var toolkitFiles embed.FS

// BaseURLPlaceholder is what the embedded toolkit manifests carry in their
// base_url until Manifests replaces it.
const BaseURLPlaceholder = "{{BASE_URL}}"

// toolkitNames are the connected-app toolkits: the keys of Manifests.
var toolkitNames = []string{"chat", "calendar", "crm", "mail"}

// Manifests returns the connected-app toolkit manifests (the toolkit
// manifest format of trawl's design), keyed "mail", "chat", "crm" and
// "calendar", with base_url pointing at baseURL (the server's URL, e.g.
// what Start returned; a trailing slash is ignored). Each tool names an
// HTTP method and a path template relative to base_url; path placeholders
// take the arguments of the same name, and the remaining arguments go in
// the query string for GET and DELETE and in a JSON object body otherwise.
func Manifests(baseURL string) map[string][]byte {
	base := strings.TrimRight(baseURL, "/")
	out := make(map[string][]byte, len(toolkitNames))
	for _, name := range toolkitNames {
		b, err := toolkitFiles.ReadFile("toolkits/" + name + ".json")
		if err != nil {
			panic("demo: embedded manifest missing: " + name) // the embed pattern guarantees it
		}
		out[name] = bytes.ReplaceAll(b, []byte(BaseURLPlaceholder), []byte(base))
	}
	return out
}
