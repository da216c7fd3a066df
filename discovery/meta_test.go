package discovery

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/trawl-dev/trawl/prompts"
)

func TestLookupMeta(t *testing.T) {
	// Each meta-tool's schema names exactly the arguments its parser
	// accepts, and its description is the embedded prompt.
	wantProps := map[string][]string{
		MetaSearchTools:     {"limit", "query", "toolkit"},
		MetaLoadTool:        {"toolName", "toolNames"},
		MetaListConnections: {},
		MetaConnectToolkit:  {"toolkit"},
	}
	for name, want := range wantProps {
		t.Run(name, func(t *testing.T) {
			m, ok := LookupMeta(name)
			if !ok {
				t.Fatal("LookupMeta: not found")
			}
			if m.Name != name || m.Description != prompts.Text(name) || len(m.Description) < 100 {
				t.Errorf("meta-tool %s: name %q, description %q", name, m.Name, m.Description)
			}
			var schema struct {
				Type                 string                     `json:"type"`
				Properties           map[string]json.RawMessage `json:"properties"`
				AdditionalProperties *bool                      `json:"additionalProperties"`
			}
			if err := json.Unmarshal(m.InputSchema, &schema); err != nil {
				t.Fatalf("schema: %v", err)
			}
			var got []string
			for k := range schema.Properties {
				got = append(got, k)
			}
			slices.Sort(got)
			if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b []string) bool { return slices.Equal(a, b) })); diff != "" || schema.Type != "object" {
				t.Errorf("schema properties (-want +got):\n%s (type %q)", diff, schema.Type)
			}
			if schema.AdditionalProperties == nil || *schema.AdditionalProperties {
				t.Error("schema allows additional properties; the parsers reject them")
			}
			// Each argument is told once, in the description the model
			// reads beside the schema: named there, not described again.
			for k, p := range schema.Properties {
				if !strings.Contains(m.Description, "`"+k+"`") {
					t.Errorf("the description does not name the argument `%s`", k)
				}
				if strings.Contains(string(p), `"description"`) {
					t.Errorf("the schema describes %s again: %s", k, p)
				}
			}
		})
	}
	if _, ok := LookupMeta("queryToolResult"); ok {
		t.Error("LookupMeta found a tool discovery does not own")
	}
	a := Assembly{Meta: []string{MetaSearchTools, MetaLoadTool}}
	got := a.MetaTools()
	if len(got) != 2 || got[0].Name != MetaSearchTools || got[1].Name != MetaLoadTool {
		t.Errorf("MetaTools = %+v", got)
	}
}

type searchAnswer struct {
	Results []searchResult `json:"results"`
	Note    string         `json:"note"`
}

func TestSearchTool(t *testing.T) {
	ix := demoIndex(t)
	loaded := func(name string) bool { return name == "MAIL_UPDATE_VACATION_SETTINGS" }
	tests := []struct {
		name    string
		args    string
		want    []string // result names, in order; nil: only check the count
		wantLen int
	}{
		{name: "query only, default limit", args: `{"query":"set an out-of-office reply"}`, wantLen: DefaultSearchLimit},
		{name: "limit", args: `{"query":"set an out-of-office reply","limit":2}`,
			want: []string{"MAIL_UPDATE_VACATION_SETTINGS", "MAIL_GET_VACATION_SETTINGS"}},
		{name: "limit as 2.0", args: `{"query":"set an out-of-office reply","limit":2.0}`, wantLen: 2},
		{name: "limit above the maximum is lowered to it", args: `{"query":"mail message","limit":50}`, wantLen: MaxSearchLimit},
		{name: "toolkit", args: `{"query":"send","toolkit":"chat","limit":1}`, want: []string{"CHAT_SEND_MESSAGE"}},
		{name: "null toolkit and limit are absent", args: `{"query":"quick add","toolkit":null,"limit":null}`, wantLen: DefaultSearchLimit},
		{name: "no match", args: `{"query":"xylophone"}`, want: []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := ix.SearchTool(t.Context(), json.RawMessage(tc.args), loaded)
			if err != nil {
				t.Fatal(err)
			}
			var got searchAnswer
			dec := json.NewDecoder(strings.NewReader(string(out)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&got); err != nil {
				t.Fatalf("answer %s: %v", out, err)
			}
			if got.Results == nil {
				t.Fatalf("answer %s: results must be a list", out)
			}
			var gotNames []string
			for _, r := range got.Results {
				gotNames = append(gotNames, r.Name)
				tl, ok := ix.Tool(r.Name)
				if !ok {
					t.Fatalf("result %q is not an indexed tool", r.Name)
				}
				if r.Toolkit != tl.Toolkit || r.Loaded != loaded(r.Name) {
					t.Errorf("result %+v: toolkit or loaded wrong", r)
				}
				if n := utf8.RuneCountInString(r.Description); n > 200 || n == 0 || !strings.HasPrefix(tl.Description, strings.TrimSuffix(r.Description, "…")) {
					t.Errorf("result %s description %q (%d characters)", r.Name, r.Description, n)
				}
			}
			if tc.want != nil {
				if diff := cmp.Diff(tc.want, gotNames, cmp.Comparer(func(a, b []string) bool { return slices.Equal(a, b) })); diff != "" {
					t.Errorf("results (-want +got):\n%s", diff)
				}
			} else if len(gotNames) != tc.wantLen {
				t.Errorf("got %d results %v, want %d", len(gotNames), gotNames, tc.wantLen)
			}
			if (len(got.Results) == 0) != (got.Note != "") {
				t.Errorf("note %q with %d results", got.Note, len(got.Results))
			}
		})
	}
}

// A long description comes back cut at a word boundary, and loaded is
// false when the caller gives no loaded function.
func TestSearchToolLongDescription(t *testing.T) {
	ix := demoIndex(t)
	out, err := ix.SearchTool(t.Context(), json.RawMessage(`{"query":"MAIL_LIST_MESSAGES","limit":1}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	var got searchAnswer
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	tl, _ := ix.Tool("MAIL_LIST_MESSAGES")
	want := []searchResult{{Name: "MAIL_LIST_MESSAGES", Toolkit: "mail", Description: shorten(tl.Description, 200), Why: "matched name: list, messages; toolkit: mail"}}
	if diff := cmp.Diff(want, got.Results); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if d := want[0].Description; !strings.HasSuffix(d, "…") || strings.HasSuffix(strings.TrimSuffix(d, "…"), " ") || len(tl.Description) <= 200 {
		t.Errorf("description %q is not a cut one", d)
	}
}

func TestSearchToolErrors(t *testing.T) {
	ix := demoIndex(t)
	tests := []struct {
		name, args, want string
		toolkit          bool // also ErrUnknownToolkit
	}{
		{"no arguments", ``, `"query" is required`, false},
		{"null", `null`, `"query" is required`, false},
		{"empty object", `{}`, `"query" is required`, false},
		{"blank query", `{"query":"  "}`, `"query" is required`, false},
		{"not an object", `["send"]`, "must be a JSON object", false},
		{"broken JSON", `{"query":`, "must be a JSON object", false},
		{"query not a string", `{"query":42}`, `"query" must be a string`, false},
		{"toolkit not a string", `{"query":"x","toolkit":["mail"]}`, `"toolkit" must be a string`, false},
		{"unknown argument", `{"query":"x","top_k":3}`, `unknown argument "top_k" (the arguments are query, toolkit, limit)`, false},
		{"limit zero", `{"query":"x","limit":0}`, `"limit" must be a whole number from 1 to 10`, false},
		{"negative limit", `{"query":"x","limit":-3}`, `"limit" must be a whole number from 1 to 10`, false},
		{"fractional limit", `{"query":"x","limit":2.5}`, `"limit" must be a whole number from 1 to 10`, false},
		{"limit as a string", `{"query":"x","limit":"5"}`, `"limit" must be a whole number from 1 to 10`, false},
		{"unknown toolkit", `{"query":"x","toolkit":"slack"}`, `unknown toolkit "slack": the searchable toolkits are calendar, chat, crm, mail`, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := ix.SearchTool(t.Context(), json.RawMessage(tc.args), nil)
			if err == nil {
				t.Fatalf("no error; answer %s", out)
			}
			if !errors.Is(err, ErrInvalidArguments) || errors.Is(err, ErrUnknownToolkit) != tc.toolkit {
				t.Errorf("error %v: wrong kind", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

type loadAnswer struct {
	Loaded []struct {
		Name        string `json:"name"`
		Toolkit     string `json:"toolkit"`
		Description string `json:"description"`
	} `json:"loaded"`
	Note string `json:"note"`
}

func TestLoadTool(t *testing.T) {
	pool := allDemoTools(t)
	ix := demoIndex(t)
	tests := []struct {
		name string
		args string
		want []string
	}{
		{"one", `{"toolName":"MAIL_UPDATE_VACATION_SETTINGS"}`, []string{"MAIL_UPDATE_VACATION_SETTINGS"}},
		{"several, in order asked", `{"toolNames":["CRM_CREATE_NOTE","CALENDAR_QUICK_ADD"]}`, []string{"CRM_CREATE_NOTE", "CALENDAR_QUICK_ADD"}},
		{"both arguments, each name once", `{"toolName":"CRM_CREATE_NOTE","toolNames":["CHAT_SEND_MESSAGE","CRM_CREATE_NOTE"," CRM_CREATE_NOTE "]}`,
			[]string{"CRM_CREATE_NOTE", "CHAT_SEND_MESSAGE"}},
		{"another case, when only one tool matches that way", `{"toolName":"mail_send_email"}`, []string{"MAIL_SEND_EMAIL"}},
		{"null toolNames is absent", `{"toolName":"CRM_GET_DEAL","toolNames":null}`, []string{"CRM_GET_DEAL"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			toLoad, out, err := LoadTool(json.RawMessage(tc.args), pool, ix)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, names(toLoad)); diff != "" {
				t.Errorf("toLoad (-want +got):\n%s", diff)
			}
			var got loadAnswer
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("answer %s: %v", out, err)
			}
			var gotNames []string
			for i, l := range got.Loaded {
				gotNames = append(gotNames, l.Name)
				if l.Toolkit != toLoad[i].Toolkit || l.Description != shorten(toLoad[i].Description, 200) {
					t.Errorf("answer entry %+v", l)
				}
			}
			if diff := cmp.Diff(tc.want, gotNames); diff != "" || !strings.Contains(got.Note, "next step") {
				t.Errorf("answer %s (-want +got names):\n%s", out, diff)
			}
		})
	}
}

func TestLoadToolUnknown(t *testing.T) {
	pool := allDemoTools(t)
	ix := demoIndex(t)
	tests := []struct {
		name        string
		args        string
		ix          *Index
		wantUnknown []string
		wantFirst   []string   // the best suggestion, per unknown name
		wantAlso    [][]string // other names the suggestions include, per unknown name
	}{
		{"a typo", `{"toolName":"MAIL_SEND_EMIAL"}`, ix, []string{"MAIL_SEND_EMIAL"}, []string{"MAIL_SEND_EMAIL"}, nil},
		{"a guessed name: search finds the tools", `{"toolName":"MAIL_SET_OUT_OF_OFFICE"}`, ix, []string{"MAIL_SET_OUT_OF_OFFICE"},
			[]string{"MAIL_UPDATE_VACATION_SETTINGS"}, [][]string{{"MAIL_GET_VACATION_SETTINGS"}}}, // "set" asks for the update
		{"a missing prefix", `{"toolName":"SEND_MESSAGE"}`, ix, []string{"SEND_MESSAGE"}, []string{"CHAT_SEND_MESSAGE"}, [][]string{{"MAIL_SEND_EMAIL"}}},
		{"without an index, edit distance only", `{"toolName":"CRM_GET_DEALS"}`, nil, []string{"CRM_GET_DEALS"},
			[]string{"CRM_GET_DEAL"}, [][]string{{"CRM_LIST_DEALS"}}},
		{"one known, two unknown: nothing is loaded", `{"toolNames":["CRM_GET_DEAL","CRM_GET_DEALS","CALENDAR_QUICKADD"]}`, ix,
			[]string{"CRM_GET_DEALS", "CALENDAR_QUICKADD"}, []string{"CRM_GET_DEAL", "CALENDAR_QUICK_ADD"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			toLoad, out, err := LoadTool(json.RawMessage(tc.args), pool, tc.ix)
			if err == nil || toLoad != nil || out != nil {
				t.Fatalf("LoadTool = %v, %s, %v; want an error only", names(toLoad), out, err)
			}
			if !errors.Is(err, ErrUnknownTool) || errors.Is(err, ErrInvalidArguments) {
				t.Errorf("error %v: wrong kind", err)
			}
			if !strings.HasSuffix(err.Error(), "; nothing was loaded") {
				t.Errorf("error %q does not say nothing was loaded", err)
			}
			joined, ok := errors.Unwrap(err).(interface{ Unwrap() []error })
			if !ok {
				t.Fatalf("error %v does not wrap one error per unknown name", err)
			}
			var unknown []*UnknownToolError
			for _, e := range joined.Unwrap() {
				var u *UnknownToolError
				if errors.As(e, &u) {
					unknown = append(unknown, u)
				}
			}
			if len(unknown) != len(tc.wantUnknown) {
				t.Fatalf("unknown names %v, want %v", unknown, tc.wantUnknown)
			}
			for i, u := range unknown {
				if u.Name != tc.wantUnknown[i] {
					t.Errorf("unknown %d is %q, want %q", i, u.Name, tc.wantUnknown[i])
				}
				if len(u.Closest) == 0 || u.Closest[0] != tc.wantFirst[i] {
					t.Errorf("closest to %q = %v, want %s first", u.Name, u.Closest, tc.wantFirst[i])
				}
				if i < len(tc.wantAlso) {
					for _, also := range tc.wantAlso[i] {
						if !slices.Contains(u.Closest, also) {
							t.Errorf("closest to %q = %v, want it to include %s", u.Name, u.Closest, also)
						}
					}
				}
				if len(u.Closest) > maxSuggestions {
					t.Errorf("%d suggestions", len(u.Closest))
				}
				if !strings.Contains(err.Error(), "the closest names are "+strings.Join(u.Closest, ", ")) {
					t.Errorf("error %q does not list %v", err, u.Closest)
				}
			}
		})
	}
}

func TestLoadToolNothingClose(t *testing.T) {
	pool := allDemoTools(t)
	_, _, err := LoadTool(json.RawMessage(`{"toolName":"qqqqqqqqqqqqqqqqqqqqqq"}`), pool, nil)
	want := `no tool named "qqqqqqqqqqqqqqqqqqqqqq" to load; find tool names with search_tools; nothing was loaded`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v\nwant    %s", err, want)
	}
}

func TestLoadToolErrors(t *testing.T) {
	pool := allDemoTools(t)
	tooMany, _ := json.Marshal(map[string]any{"toolNames": names(pool[:11])})
	tests := []struct{ name, args, want string }{
		{"no arguments", ``, `give "toolName" (one tool) or "toolNames" (a list)`},
		{"empty object", `{}`, `give "toolName" (one tool) or "toolNames" (a list)`},
		{"empty list", `{"toolNames":[]}`, `give "toolName" (one tool) or "toolNames" (a list)`},
		{"not an object", `"MAIL_SEND_EMAIL"`, "must be a JSON object"},
		{"toolName not a string", `{"toolName":["MAIL_SEND_EMAIL"]}`, `"toolName" must be a string`},
		{"toolNames not a list", `{"toolNames":"MAIL_SEND_EMAIL"}`, `"toolNames" must be a list of tool names`},
		{"toolNames with a number", `{"toolNames":["MAIL_SEND_EMAIL",3]}`, `"toolNames" must be a list of tool names`},
		{"an empty name", `{"toolNames":["MAIL_SEND_EMAIL"," "]}`, "a tool name is empty"},
		{"unknown argument", `{"tool":"MAIL_SEND_EMAIL"}`, `unknown argument "tool" (the arguments are toolName, toolNames)`},
		{"too many", string(tooMany), "at most 10 tools can be loaded in one call; 11 were asked for"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := LoadTool(json.RawMessage(tc.args), pool, nil)
			if !errors.Is(err, ErrInvalidArguments) {
				t.Fatalf("error %v, want ErrInvalidArguments", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

// An ambiguous case-insensitive name is not guessed.
func TestLoadToolCaseAmbiguous(t *testing.T) {
	pool := fakeTools("app", "kit", 1)
	twin := *pool[0]
	twin.ID, twin.Name = "kit.KIT_TOOL_0", "KIT_TOOL_0"
	pool = append(pool, &twin)
	_, _, err := LoadTool(json.RawMessage(`{"toolName":"Kit_Tool_0"}`), pool, nil)
	var u *UnknownToolError
	if !errors.As(err, &u) || !slices.Equal(u.Closest, []string{"KIT_TOOL_0", "kit_tool_0"}) {
		t.Errorf("err = %v", err)
	}
	toLoad, _, err := LoadTool(json.RawMessage(`{"toolName":"kit_tool_0"}`), pool, nil)
	if err != nil || len(toLoad) != 1 || toLoad[0].Name != "kit_tool_0" {
		t.Errorf("exact name: %v, %v", names(toLoad), err)
	}
}

// FuzzMetaArgs feeds arbitrary argument bytes to both meta-tools: they
// answer valid JSON or an error of a documented kind, never panic.
func FuzzMetaArgs(f *testing.F) {
	for _, s := range []string{`{"query":"send"}`, `{"query":"x","limit":3,"toolkit":"mail"}`, `{"toolName":"MAIL_SEND_EMAIL"}`,
		`{"toolNames":["a","b"]}`, `null`, `[]`, `{"limit":1e309}`, `{"query":"\u0000"}`, `{"toolName":"` + strings.Repeat("x", 300) + `"}`} {
		f.Add([]byte(s))
	}
	pool := allDemoTools(f)
	ix, err := NewIndex(pool)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { ix.Close() })
	f.Fuzz(func(t *testing.T, args []byte) {
		out, err := ix.SearchTool(t.Context(), args, nil)
		if err != nil && !errors.Is(err, ErrInvalidArguments) {
			t.Fatalf("SearchTool(%q): %v", args, err)
		}
		if err == nil && !json.Valid(out) {
			t.Fatalf("SearchTool(%q) answered %q", args, out)
		}
		toLoad, out, err := LoadTool(args, pool, ix)
		if err != nil && !errors.Is(err, ErrInvalidArguments) && !errors.Is(err, ErrUnknownTool) {
			t.Fatalf("LoadTool(%q): %v", args, err)
		}
		if err == nil && (!json.Valid(out) || len(toLoad) == 0) {
			t.Fatalf("LoadTool(%q) answered %q with %d tools", args, out, len(toLoad))
		}
	})
}
