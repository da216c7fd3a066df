package demo

import (
	"bytes"
	"encoding/json"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type manifest struct {
	Toolkit     string `json:"toolkit"`
	Name        string `json:"name"`
	Description string `json:"description"`
	BaseURL     string `json:"base_url"`
	Auth        struct {
		Type string `json:"type"`
	} `json:"auth"`
	Tools []manifestTool `json:"tools"`
}

type manifestTool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	InputSchema struct {
		Type       string                    `json:"type"`
		Properties map[string]map[string]any `json:"properties"`
		Required   []string                  `json:"required"`
	} `json:"inputSchema"`
	HTTP struct {
		Method string `json:"method"`
		Path   string `json:"path"`
	} `json:"http"`
	Effect string `json:"effect"`
}

func loadManifests(t *testing.T, base string) map[string]manifest {
	t.Helper()
	out := map[string]manifest{}
	for key, b := range Manifests(base) {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		var m manifest
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("%s manifest: %v", key, err)
		}
		out[key] = m
	}
	return out
}

var placeholderRE = regexp.MustCompile(`\{([^}]+)\}`)

func TestManifests(t *testing.T) {
	ms := loadManifests(t, "http://127.0.0.1:9999/")
	if diff := cmp.Diff([]string{"calendar", "chat", "crm", "mail"}, sortedKeys(ms)); diff != "" {
		t.Fatalf("toolkits (-want +got):\n%s", diff)
	}
	validName := regexp.MustCompile(`^[A-Z][A-Z0-9_]{2,63}$`)
	seen := map[string]bool{}
	for key, m := range ms {
		if m.Toolkit != key || m.Name == "" || len(m.Description) < 40 || m.Auth.Type != "bearer" {
			t.Errorf("%s: bad header %q %q %q %q", key, m.Toolkit, m.Name, m.Description, m.Auth.Type)
		}
		if m.BaseURL != "http://127.0.0.1:9999/"+key {
			t.Errorf("%s: base_url %q", key, m.BaseURL)
		}
		prefix := strings.ToUpper(key) + "_"
		for _, tool := range m.Tools {
			if !validName.MatchString(tool.Name) || !strings.HasPrefix(tool.Name, prefix) || seen[tool.Name] {
				t.Errorf("%s: bad or duplicate name %q", key, tool.Name)
			}
			seen[tool.Name] = true
			if len(tool.Description) < 25 {
				t.Errorf("%s: description too short: %q", tool.Name, tool.Description)
			}
			if tool.InputSchema.Type != "object" || tool.InputSchema.Properties == nil {
				t.Errorf("%s: inputSchema is not an object schema", tool.Name)
			}
			for _, r := range tool.InputSchema.Required {
				if _, ok := tool.InputSchema.Properties[r]; !ok {
					t.Errorf("%s: required %q is not a property", tool.Name, r)
				}
			}
			for _, m := range placeholderRE.FindAllStringSubmatch(tool.HTTP.Path, -1) {
				if !slices.Contains(tool.InputSchema.Required, m[1]) {
					t.Errorf("%s: path parameter %q is not a required property", tool.Name, m[1])
				}
			}
			for name, prop := range tool.InputSchema.Properties {
				if prop["type"] == nil {
					t.Errorf("%s.%s: no type", tool.Name, name)
				}
				if name == "body" {
					t.Errorf("%s: an argument named body would be taken for the whole request body", tool.Name)
				}
			}
			if !slices.Contains([]string{"GET", "POST", "PUT", "PATCH", "DELETE"}, tool.HTTP.Method) || !strings.HasPrefix(tool.HTTP.Path, "/") {
				t.Errorf("%s: bad http %+v", tool.Name, tool.HTTP)
			}
		}
	}
	if n := len(ms["mail"].Tools); n < 60 {
		t.Errorf("mail has %d tools, want at least 60", n)
	}
	if n := len(ms["chat"].Tools); n != 3 {
		t.Errorf("chat has %d tools, want 3", n)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// invoke calls a manifest tool the way the design's invoker does: path
// placeholders from the arguments, the rest in the query for GET and
// DELETE, else as a JSON object body.
func invoke(t *testing.T, m manifest, tool manifestTool, args map[string]any) (int, []byte) {
	t.Helper()
	rest := map[string]any{}
	for k, v := range args {
		rest[k] = v
	}
	path := placeholderRE.ReplaceAllStringFunc(tool.HTTP.Path, func(ph string) string {
		name := ph[1 : len(ph)-1]
		v, ok := rest[name]
		if !ok {
			t.Fatalf("%s: no value for path parameter %s", tool.Name, name)
		}
		delete(rest, name)
		return url.PathEscape(v.(string))
	})
	u := m.BaseURL + path
	var body any
	if tool.HTTP.Method == "GET" || tool.HTTP.Method == "DELETE" {
		q := url.Values{}
		for k, v := range rest {
			switch x := v.(type) {
			case []any:
				for _, e := range x {
					q.Add(k, e.(string))
				}
			default:
				q.Set(k, scalar(x))
			}
		}
		if len(q) > 0 {
			u += "?" + q.Encode()
		}
	} else if len(rest) > 0 {
		body = rest
	}
	status, _, b := call(t, tool.HTTP.Method, u, body)
	return status, b
}

// sampleArgs are plausible values by argument name; overrides win for the
// tools that need a fresh value (creating what the shared sample names).
func sampleArgs(t *testing.T, base string) (map[string]any, map[string]map[string]any) {
	t.Helper()
	var withAtt messageList
	getJSON(t, base+"/mail/messages?q=has:attachment&maxResults=1", &withAtt)
	var msg mailMessage
	getJSON(t, base+"/mail/messages/"+withAtt.Messages[0].ID, &msg)
	var drafts struct {
		Drafts []draftView `json:"drafts"`
	}
	getJSON(t, base+"/mail/drafts", &drafts)
	var filters struct {
		Filter []mailFilter `json:"filter"`
	}
	getJSON(t, base+"/mail/settings/filters", &filters)
	var events struct {
		Items []calEvent `json:"items"`
	}
	getJSON(t, base+"/calendar/calendars/primary/events?maxResults=1", &events)
	shared := map[string]any{
		"messageId": msg.ID, "attachmentId": msg.Attachments[0].AttachmentID, "threadId": msg.ThreadID, "draftId": drafts.Drafts[0].ID,
		"labelId": "Label_1", "filterId": filters.Filter[0].ID, "forwardingEmail": "jordan.personal@mailbox.example",
		"sendAsEmail": "support@acme.example", "delegateEmail": "sam@acme.example", "conversation_id": "conv_03",
		"contact_id": "5101", "company_id": "3001", "deal_id": "7001", "calendarId": "primary", "eventId": events.Items[0].ID,
		"q": "invoice", "to": []any{"priya.patel@globex.example"}, "subject": "Quarterly numbers", "messageBody": "Numbers attached.",
		"ids": []any{msg.ID}, "name": "Projects/Q3", "criteria": map[string]any{"from": "billing@initech.example"},
		"action": map[string]any{"addLabelIds": []any{"Label_1"}}, "enableAutoReply": true, "enabled": false,
		"displayLanguage": "pt-BR", "signature": "Jordan Lee — Acme", "startHistoryId": "1000", "text": "Lunch with Sam tomorrow at 12:30",
		"content": "Called; they want a quote by Friday.", "query": "globex", "email": "new.person@hooli.example", "dealname": "Hooli — Pilot",
		"summary": "Pricing sync", "start": "2025-06-03T10:00:00Z", "end": "2025-06-03T10:30:00Z",
		"timeMin": "2025-06-01T00:00:00Z", "timeMax": "2025-06-08T00:00:00Z",
	}
	overrides := map[string]map[string]any{
		"MAIL_CREATE_SEND_AS_ALIAS":      {"sendAsEmail": "sales@acme.example"},
		"MAIL_ADD_DELEGATE":              {"delegateEmail": "kofi@acme.example"},
		"MAIL_CREATE_FORWARDING_ADDRESS": {"forwardingEmail": "archive@mailbox.example"},
		"MAIL_IMPORT_MESSAGE":            {"from": "Ops Bot <ops@initech.example>"},
	}
	return shared, overrides
}

// TestEveryToolAnswers calls every manifest tool with plausible arguments,
// each on freshly generated data, and wants a success.
func TestEveryToolAnswers(t *testing.T) {
	s, ts := serve(t, Options{})
	shared, overrides := sampleArgs(t, ts.URL)
	ms := loadManifests(t, ts.URL)
	count := 0
	for _, key := range []string{"mail", "chat", "crm", "calendar"} {
		m := ms[key]
		for _, tool := range m.Tools {
			args := map[string]any{}
			for name := range tool.InputSchema.Properties {
				if v, ok := overrides[tool.Name][name]; ok {
					args[name] = v
				} else if v, ok := shared[name]; ok {
					args[name] = v
				}
			}
			for _, r := range tool.InputSchema.Required {
				if _, ok := args[r]; !ok {
					t.Fatalf("%s: no sample for required %q", tool.Name, r)
				}
			}
			status, body := invoke(t, m, tool, args)
			if status < 200 || status > 299 {
				t.Errorf("%s %s %s: %d %s", tool.Name, tool.HTTP.Method, tool.HTTP.Path, status, body)
			}
			if tool.HTTP.Method != "GET" {
				s.Reset() // the next tool sees the generated data again
			}
			count++
		}
	}
	if count < 90 {
		t.Errorf("only %d tools called", count)
	}
}
