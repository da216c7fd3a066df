package discovery

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestToolActions(t *testing.T) {
	tests := []struct {
		name, method, path string
		want, wantObject   []string
	}{
		{"SEND EMAIL", "POST", "/send", []string{"send"}, []string{"EMAIL"}},
		{"LIST SEND AS ALIASES", "GET", "/aliases", []string{"list"}, []string{"SEND", "AS", "ALIASES"}},
		{"add Group", "POST", "/groups", []string{"create", "add"}, []string{"Group"}},
		{"get Invoices", "GET", "/Invoices", []string{"list", "get"}, []string{"Invoices"}}, // a plural get lists
		{"get Invoice", "GET", "/Invoices/{id}", []string{"get"}, []string{"Invoice"}},
		{"get Address", "GET", "/address", []string{"get"}, []string{"Address"}}, // -ss is not a plural
		{"bulk delete messages", "POST", "/bulk", []string{"delete"}, []string{"bulk", "messages"}},
		{"ban user from guild", "PUT", "/bans/{id}", []string{"ban"}, []string{"user", "from", "guild"}},
		{"guild search", "GET", "/search", []string{"search"}, []string{"guild"}},
		{"Invoices", "GET", "/invoices/{id}", []string{"get"}, []string{"Invoices"}}, // no verb: the method
		{"Invoices", "", "", nil, []string{"Invoices"}},
	}
	for _, tc := range tests {
		acts, obj := toolActions(splitWords(tc.name), tc.method, tc.path)
		if diff := cmp.Diff(tc.want, acts); diff != "" {
			t.Errorf("toolActions(%q) actions (-want +got):\n%s", tc.name, diff)
		}
		if diff := cmp.Diff(tc.wantObject, obj); diff != "" {
			t.Errorf("toolActions(%q) object (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestQueryActions(t *testing.T) {
	tests := []struct {
		query string
		want  []queryAction
	}{
		{"can you move my 3 pm with Dana to Thursday", []queryAction{{"update", verbWeight}}},
		{"send an email to Priya", []queryAction{{"send", verbWeight}}},
		{"find the email from Dana", []queryAction{{"search", verbWeight}, {"get", otherMeanWeight}, {"list", otherMeanWeight}}},
		{"email the team", []queryAction{{"send", verbWeight}}},               // first: a verb
		{"set an out-of-office reply", []queryAction{{"update", verbWeight}}}, // "reply" is a noun here
		{"I want to cancel the meeting", []queryAction{{"delete", verbWeight}}},
		{"cancelled meetings", []queryAction{{"delete", verbWeight}}}, // inflections
		{"ban this user", []queryAction{{"ban", verbWeight}}},         // a verb of its own
		{"who is on the backend team", []queryAction{{"list", questionWeight}, {"get", questionWeight}}},
		{"mark everything as read", []queryAction{{"mark", verbWeight}}}, // "read" is not first
		{"invoices of Globex", nil},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, queryActions(splitWords(tc.query)), cmp.AllowUnexported(queryAction{})); diff != "" {
			t.Errorf("queryActions(%q) (-want +got):\n%s", tc.query, diff)
		}
	}
}

// A query that asks for an action prefers the tool that does it over
// one that only names it.
func TestSearchPrefersTheAction(t *testing.T) {
	ix := demoIndex(t)
	for q, want := range map[string]string{
		"send an email":                "MAIL_SEND_EMAIL",
		"delete a label":               "MAIL_DELETE_LABEL",
		"can you move my 3 pm meeting": "CALENDAR_UPDATE_EVENT",
	} {
		hits, err := ix.Search(t.Context(), q, "", 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) == 0 || hits[0].Tool.Name != want {
			t.Errorf("Search(%q) = %v, want %s first", q, hitNames(hits), want)
		}
	}
}
