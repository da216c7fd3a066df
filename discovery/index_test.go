package discovery

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/trawl-dev/trawl/tools"
)

func demoIndex(t *testing.T) *Index {
	t.Helper()
	ix, err := NewIndex(allDemoTools(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	return ix
}

func TestNewIndexErrors(t *testing.T) {
	a := &tools.Tool{ID: "k.A", Provider: "k", Name: "A", Kind: tools.KindApp, Toolkit: "k"}
	sameID := &tools.Tool{ID: "k.A", Provider: "k", Name: "B", Kind: tools.KindApp, Toolkit: "k"}
	sameName := &tools.Tool{ID: "j.A", Provider: "j", Name: "A", Kind: tools.KindApp, Toolkit: "j"}
	tests := []struct {
		name string
		ts   []*tools.Tool
		want string
	}{
		{"nil tool", []*tools.Tool{a, nil}, "tool 1 is nil"},
		{"duplicate id", []*tools.Tool{a, sameID}, `tool id "k.A" is indexed twice`},
		{"duplicate name", []*tools.Tool{a, sameName}, `share the name "A"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ix, err := NewIndex(tc.ts)
			if err == nil {
				ix.Close()
				t.Fatal("NewIndex succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

func TestEmptyIndex(t *testing.T) {
	ix, err := NewIndex(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	hits, err := ix.Search(t.Context(), "send an email", "", 5)
	if err != nil || len(hits) != 0 {
		t.Errorf("Search on an empty index = %v, %v; want nothing", hitNames(hits), err)
	}
	_, err = ix.Search(t.Context(), "send an email", "mail", 5)
	if !errors.Is(err, ErrUnknownToolkit) || !strings.Contains(err.Error(), "no tool is searchable") {
		t.Errorf("toolkit filter on an empty index: %v", err)
	}
}

// A long query is cut to its first maxQueryWords words (plus thesaurus
// words), and still answers.
func TestLongQuery(t *testing.T) {
	ix := demoIndex(t)
	var words []string
	for i := range 5000 {
		words = append(words, fmt.Sprintf("word%d", i))
	}
	long := "set an out-of-office reply " + strings.Join(words, " ")
	terms := ix.queryTerms(long)
	if len(terms) > 2*maxQueryWords {
		t.Errorf("%d terms searched", len(terms))
	}
	hits, err := ix.Search(t.Context(), long, "", 1)
	if err != nil || len(hits) != 1 || hits[0].Tool.Name != "MAIL_UPDATE_VACATION_SETTINGS" {
		t.Errorf("Search(long) = %v, %v", hitNames(hits), err)
	}
}

// Every tool is found first when the model asks for it by name, in any
// of the spellings a model uses.
func TestSearchByName(t *testing.T) {
	ix := demoIndex(t)
	for _, tl := range ix.Tools() {
		for _, q := range []string{tl.Name, strings.ToLower(tl.Name), strings.ReplaceAll(strings.ToLower(tl.Name), "_", " ")} {
			hits, err := ix.Search(t.Context(), q, "", 1)
			if err != nil {
				t.Fatal(err)
			}
			if len(hits) == 0 || hits[0].Tool != tl {
				t.Errorf("Search(%q) = %v, want %s first", q, hitNames(hits), tl.Name)
			}
		}
	}
}

func TestSearch(t *testing.T) {
	ix := demoIndex(t)
	tests := []struct {
		name, query, toolkit string
		limit                int
		wantFirst            string
		wantLen              int
		wantKit              string // every hit from this toolkit
		wantLast             string
	}{
		{name: "plain words", query: "set an out-of-office reply", wantFirst: "MAIL_UPDATE_VACATION_SETTINGS"},
		{name: "a camelCase parameter name", query: "startHistoryId", wantFirst: "MAIL_LIST_HISTORY"},
		{name: "a camelCase tool name without its prefix", query: "quickAdd", wantFirst: "CALENDAR_QUICK_ADD"},
		{name: "snake_case words", query: "free_busy", wantFirst: "CALENDAR_FIND_FREE_BUSY"},
		{name: "stemming: plural and verb forms", query: "rescheduling events", wantFirst: "CALENDAR_UPDATE_EVENT"},
		{name: "upper case", query: "SEND A CHAT MESSAGE", wantFirst: "CHAT_SEND_MESSAGE"},
		{name: "toolkit filter by id", query: "send a message", toolkit: "chat", wantFirst: "CHAT_SEND_MESSAGE", wantKit: "chat"},
		{name: "toolkit filter by display name, any case", query: "list", toolkit: "CRM", limit: 10, wantLen: 5, wantKit: "crm"},
		{name: "toolkit filter keeps few", query: "messages", toolkit: "chat", limit: 10, wantLen: 3, wantKit: "chat"},
		{name: "default limit", query: "mail message", wantLen: DefaultSearchLimit},
		{name: "limit", query: "mail message", limit: 2, wantLen: 2},
		{name: "typos: fuzzy fallback", query: "vacaton setings", wantFirst: "MAIL_GET_VACATION_SETTINGS"},
		{name: "a typo the stemmer would hide", query: "calender", limit: 10, wantLen: 8, wantKit: "calendar"},
		// The typo fallback runs only when nothing matches: here "send"
		// does, and the misspelt tool, the one tool whose action is send,
		// still comes first.
		{name: "a typo in a tool name", query: "MAIL_SEND_EMIAL", limit: 2, wantLen: 2, wantFirst: "MAIL_SEND_EMAIL"},
		{name: "only stop words", query: "the and of", wantLen: 0},
		{name: "nothing close", query: "xylophone quantum", wantLen: 0},
		{name: "punctuation only", query: "?!…", wantLen: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hits, err := ix.Search(t.Context(), tc.query, tc.toolkit, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantFirst != "" && (len(hits) == 0 || hits[0].Tool.Name != tc.wantFirst) {
				t.Errorf("Search(%q) = %v, want %s first", tc.query, hitNames(hits), tc.wantFirst)
			}
			if tc.wantLast != "" && (len(hits) == 0 || hits[len(hits)-1].Tool.Name != tc.wantLast) {
				t.Errorf("Search(%q) = %v, want %s last", tc.query, hitNames(hits), tc.wantLast)
			}
			if tc.wantFirst == "" && len(hits) != tc.wantLen {
				t.Errorf("Search(%q) = %v, want %d hits", tc.query, hitNames(hits), tc.wantLen)
			}
			for i, h := range hits {
				if tc.wantKit != "" && h.Tool.Toolkit != tc.wantKit {
					t.Errorf("hit %s is not in toolkit %s", h.Tool.Name, tc.wantKit)
				}
				if i > 0 && h.Score > hits[i-1].Score {
					t.Errorf("hits not best first: %v", hits)
				}
			}
		})
	}
}

func TestSearchUnknownToolkit(t *testing.T) {
	ix := demoIndex(t)
	_, err := ix.Search(t.Context(), "send", "slack", 5)
	if !errors.Is(err, ErrUnknownToolkit) {
		t.Fatalf("err = %v, want ErrUnknownToolkit", err)
	}
	want := `unknown toolkit "slack": the searchable toolkits are calendar, chat, crm, mail`
	if err.Error() != want {
		t.Errorf("error = %q\nwant    %q", err, want)
	}
}

// Equal scores are ordered by tool id, so results never flap.
func TestSearchDeterministic(t *testing.T) {
	ix := demoIndex(t)
	first, _ := ix.Search(t.Context(), "delete", "", 10)
	for range 20 {
		again, _ := ix.Search(t.Context(), "delete", "", 10)
		if diff := cmp.Diff(hitNames(first), hitNames(again)); diff != "" {
			t.Fatalf("results changed (-first +again):\n%s", diff)
		}
	}
}

// The index scores with BM25. bleve's NewMemOnly index would score with
// TF-IDF even with the BM25 mapping, without any error; this catches a
// change back.
func TestScoringIsBM25(t *testing.T) {
	ix := demoIndex(t)
	terms := ix.queryTerms("archive a thread")
	full := ix.buildQuery("archive a thread", terms, ix.fieldClauses(terms), false)
	req := bleve.NewSearchRequest(full)
	req.Explain = true
	res, err := ix.bleve.Search(req)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Hits) == 0 {
		t.Fatal("no hits")
	}
	expl := res.Hits[0].Expl.String()
	if !strings.Contains(expl, "as per bm25 model") || strings.Contains(expl, "tf-idf") {
		t.Errorf("the score is not BM25:\n%.2000s", expl)
	}
}

func TestSearchConcurrent(t *testing.T) {
	ix := demoIndex(t)
	want, _ := ix.Search(t.Context(), "archive an email", "", 5)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				got, err := ix.Search(t.Context(), "archive an email", "", 5)
				if err != nil {
					t.Error(err)
					return
				}
				if !cmp.Equal(hitNames(want), hitNames(got)) {
					t.Errorf("concurrent search: %v, want %v", hitNames(got), hitNames(want))
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestIndexAccessors(t *testing.T) {
	ts := allDemoTools(t)
	ix, err := NewIndex(ts)
	if err != nil {
		t.Fatal(err)
	}
	if ix.Len() != 96 {
		t.Errorf("Len = %d, want 96", ix.Len())
	}
	if diff := cmp.Diff(names(ts), names(ix.Tools())); diff != "" {
		t.Errorf("Tools (-want +got):\n%s", diff)
	}
	if tl, ok := ix.Tool("CRM_CREATE_NOTE"); !ok || tl.ID != "crm.CRM_CREATE_NOTE" {
		t.Errorf("Tool(CRM_CREATE_NOTE) = %v, %v", tl, ok)
	}
	if _, ok := ix.Tool("crm_create_note"); ok {
		t.Error("Tool matched a name in another case")
	}
	if err := ix.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := ix.Search(t.Context(), "note", "", 5); err == nil {
		t.Error("Search after Close succeeded")
	}
}

func TestSplitWords(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"MAIL_LIST_MESSAGES", []string{"MAIL", "LIST", "MESSAGES"}},
		{"enableAutoReply", []string{"enable", "Auto", "Reply"}},
		{"HTTPServerError", []string{"HTTP", "Server", "Error"}},
		{"getV2Items", []string{"get", "V", "2", "Items"}},
		{"list-open_PRs now", []string{"list", "open", "P", "Rs", "now"}},
		{"out-of-office", []string{"out", "of", "office"}},
		{"Réponse_Automatique", []string{"Réponse", "Automatique"}},
		{"  ", nil},
		{"", nil},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, splitWords(tc.in)); diff != "" {
			t.Errorf("splitWords(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestNameWords(t *testing.T) {
	tests := []struct {
		name     string
		prefixes []string
		want     string
	}{
		{"MAIL_LIST_MESSAGES", []string{"mail", "Mail"}, "LIST MESSAGES"},
		{"CRM_GET_DEAL", []string{"crm"}, "GET DEAL"},
		{"listOrders", []string{"acme"}, "list Orders"},
		{"google_calendar_list", []string{"google-calendar"}, "google calendar list"}, // only a one-word prefix is dropped
		{"MAIL", []string{"mail"}, "MAIL"},                                            // never the whole name
	}
	for _, tc := range tests {
		if got := nameWords(tc.name, tc.prefixes...); got != tc.want {
			t.Errorf("nameWords(%q, %q) = %q, want %q", tc.name, tc.prefixes, got, tc.want)
		}
	}
}

func TestShorten(t *testing.T) {
	long := strings.Repeat("word ", 60)
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"short enough", 200, "short enough"},
		{"  spaces \n and\ttabs  ", 200, "spaces and tabs"},
		{"Lists the messages, newest first.", 20, "Lists the messages…"},
		{"one two three", 9, "one two…"},
		{"Supercalifragilistic", 8, "Superca…"},
		{"trim the dash — here", 16, "trim the dash…"},
		{long, 200, strings.TrimSpace(strings.Repeat("word ", 40)) + "…"}, // 199 + 1
	}
	for _, tc := range tests {
		got := shorten(tc.in, tc.n)
		if got != tc.want {
			t.Errorf("shorten(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
		if utf8.RuneCountInString(got) > tc.n {
			t.Errorf("shorten(%q, %d) is %d runes long", tc.in, tc.n, utf8.RuneCountInString(got))
		}
	}
}

func FuzzSplitWords(f *testing.F) {
	for _, s := range []string{"MAIL_LIST_MESSAGES", "enableAutoReply", "HTTPServer", "v2Items", "é_Ü", "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		words := splitWords(s)
		for _, w := range words {
			if w == "" {
				t.Fatalf("splitWords(%q) has an empty word: %q", s, words)
			}
			for _, r := range w {
				if !isWordRune(r) {
					t.Fatalf("splitWords(%q) word %q holds %q", s, w, r)
				}
			}
		}
		if got := shorten(s, 20); utf8.RuneCountInString(got) > 20 {
			t.Fatalf("shorten(%q, 20) = %q", s, got)
		}
	})
}

// FuzzSearch feeds arbitrary queries and toolkit filters to Search: it
// never fails except for an unknown toolkit, never returns more than
// asked, and returns hits best first, each with a one-line why.
func FuzzSearch(f *testing.F) {
	for _, s := range []string{"send an email", "MAIL_SEND_EMAIL", "calender", "", "~*?", "a:b +c -d \"e\"", "\x00", "can you move my 3 pm with Dana to Thursday", "who's in?"} {
		f.Add(s, "", 5)
	}
	f.Add("archive", "mail", 3)
	f.Add("archive", "nope", 0)
	ix, err := NewIndex(allDemoTools(f))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { ix.Close() })
	f.Fuzz(func(t *testing.T, q, toolkit string, limit int) {
		limit %= 20
		hits, err := ix.Search(t.Context(), q, toolkit, limit)
		if err != nil {
			if errors.Is(err, ErrUnknownToolkit) {
				return
			}
			t.Fatalf("Search(%q, %q, %d): %v", q, toolkit, limit, err)
		}
		if want := max(limit, 0); want == 0 && len(hits) > DefaultSearchLimit || want > 0 && len(hits) > want {
			t.Fatalf("Search(%q, %q, %d) returned %d hits", q, toolkit, limit, len(hits))
		}
		for i, h := range hits {
			if h.Why == "" || strings.Contains(h.Why, "\n") {
				t.Errorf("hit %s: why %q is not one line", h.Tool.Name, h.Why)
			}
			if i > 0 && h.Score > hits[i-1].Score {
				t.Errorf("Search(%q): hits not best first", q)
			}
		}
	})
}
