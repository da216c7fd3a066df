package demo

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func post(t *testing.T, method, u string, body any, v any) {
	t.Helper()
	status, _, b := call(t, method, u, body)
	if status/100 != 2 {
		t.Fatalf("%s %s: %d %s", method, u, status, b)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s %s: %v: %s", method, u, err, b)
		}
	}
}

func TestMailSendAndHistory(t *testing.T) {
	now := time.Date(2025, 7, 2, 9, 30, 0, 0, time.UTC)
	s, ts := serve(t, Options{Now: func() time.Time { return now }})
	mail := ts.URL + "/mail"
	var before struct {
		MessagesTotal int    `json:"messagesTotal"`
		HistoryID     string `json:"historyId"`
	}
	getJSON(t, mail+"/profile", &before)

	var sent msgRef
	post(t, "POST", mail+"/messages/send", map[string]any{"to": []string{"priya@globex.example"}, "subject": "Renewal terms", "messageBody": "See attached."}, &sent)
	if sent.ID == "" || !slices.Contains(sent.LabelIDs, "SENT") {
		t.Fatalf("send returned %+v", sent)
	}
	var found messageList
	getJSON(t, mail+"/messages/search?q="+url.QueryEscape(`in:sent subject:"Renewal terms"`), &found)
	if len(found.Messages) != 1 || found.Messages[0].ID != sent.ID {
		t.Fatalf("sent message not found: %+v", found.Messages)
	}
	var full mailMessage
	getJSON(t, mail+"/messages/"+sent.ID, &full)
	if full.Date != now.Format(time.RFC1123Z) || full.To[0] != "priya@globex.example" {
		t.Errorf("sent message: date %q to %v", full.Date, full.To)
	}

	var reply msgRef
	post(t, "POST", mail+"/messages/"+sent.ID+"/reply", map[string]any{"messageBody": "One more thing."}, &reply)
	var thread struct {
		Messages []mailMessage `json:"messages"`
	}
	getJSON(t, mail+"/threads/"+sent.ThreadID, &thread)
	if len(thread.Messages) != 2 || thread.Messages[1].Subject != "Re: Renewal terms" || thread.Messages[1].To[0] != "priya@globex.example" {
		t.Errorf("reply thread: %+v", thread.Messages)
	}

	post(t, "POST", mail+"/messages/"+sent.ID+"/star", nil, nil)
	var hist struct {
		History []historyRecord `json:"history"`
	}
	getJSON(t, mail+"/history?startHistoryId="+before.HistoryID, &hist)
	var kinds []string
	for _, h := range hist.History {
		switch {
		case len(h.MessagesAdded) > 0:
			kinds = append(kinds, "added "+h.MessagesAdded[0].Message.ID)
		case len(h.LabelsAdded) > 0:
			kinds = append(kinds, "labelled "+strings.Join(h.LabelsAdded[0].LabelIDs, ","))
		}
	}
	if diff := cmp.Diff([]string{"added " + sent.ID, "added " + reply.ID, "labelled STARRED"}, kinds); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}

	s.Reset()
	var after struct {
		MessagesTotal int `json:"messagesTotal"`
	}
	getJSON(t, mail+"/profile", &after)
	if after.MessagesTotal != before.MessagesTotal {
		t.Errorf("Reset left %d messages, want %d", after.MessagesTotal, before.MessagesTotal)
	}
}

func TestMailLabelsTrashDrafts(t *testing.T) {
	_, ts := serve(t, Options{})
	mail := ts.URL + "/mail"

	var lbl mailLabel
	post(t, "POST", mail+"/labels", map[string]any{"name": "Clients/Globex", "color": map[string]string{"textColor": "#000000", "backgroundColor": "#ffad47"}}, &lbl)
	if status, _, _ := call(t, "POST", mail+"/labels", map[string]any{"name": "clients/globex"}); status != http.StatusConflict {
		t.Errorf("duplicate label name: %d", status)
	}
	if status, _, b := call(t, "DELETE", mail+"/labels/INBOX", nil); status != http.StatusBadRequest || !strings.Contains(string(b), `"INVALID_ARGUMENT"`) {
		t.Errorf("deleting a system label: %d %s", status, b)
	}
	var inbox messageList
	getJSON(t, mail+"/messages?labelIds=INBOX&maxResults=3", &inbox)
	id := inbox.Messages[0].ID
	post(t, "POST", mail+"/messages/batchModify", map[string]any{"ids": []string{id, inbox.Messages[1].ID}, "addLabelIds": []string{lbl.ID}, "removeLabelIds": []string{"INBOX"}}, nil)
	var detail struct{ MessagesTotal int }
	getJSON(t, mail+"/labels/"+lbl.ID, &detail)
	if detail.MessagesTotal != 2 {
		t.Errorf("label counts %d messages, want 2", detail.MessagesTotal)
	}

	post(t, "POST", mail+"/messages/"+id+"/trash", nil, nil)
	var list messageList
	getJSON(t, mail+"/messages?q="+url.QueryEscape("label:Clients/Globex"), &list)
	if len(list.Messages) != 1 {
		t.Errorf("trashed message still listed: %d", len(list.Messages))
	}
	getJSON(t, mail+"/messages?q=in:trash+label:"+lbl.ID, &list)
	if len(list.Messages) != 1 || list.Messages[0].ID != id {
		t.Errorf("in:trash: %+v", list.Messages)
	}
	var purged map[string]int
	post(t, "POST", mail+"/trash/empty", nil, &purged)
	if status, _, _ := call(t, "GET", mail+"/messages/"+id, nil); status != http.StatusNotFound || purged["deletedMessages"] == 0 {
		t.Errorf("message survived emptying the trash: %d (%v)", status, purged)
	}

	var d draftView
	post(t, "POST", mail+"/drafts", map[string]any{"subject": "Offsite"}, &d)
	if status, _, _ := call(t, "POST", mail+"/drafts/"+d.ID+"/send", nil); status != http.StatusBadRequest {
		t.Errorf("sending a draft without recipients: %d", status)
	}
	post(t, "PUT", mail+"/drafts/"+d.ID, map[string]any{"to": []string{"team@acme.example"}, "messageBody": "Agenda below."}, nil)
	var sent msgRef
	post(t, "POST", mail+"/drafts/"+d.ID+"/send", nil, &sent)
	if status, _, _ := call(t, "GET", mail+"/drafts/"+d.ID, nil); status != http.StatusNotFound {
		t.Errorf("sent draft still exists: %d", status)
	}
	var msg mailMessage
	getJSON(t, mail+"/messages/"+sent.ID, &msg)
	if msg.Subject != "Offsite" || msg.Body != "Agenda below." || !slices.Equal(msg.LabelIDs, []string{"SENT"}) {
		t.Errorf("sent draft: %+v", msg)
	}
}

func TestMailSettings(t *testing.T) {
	_, ts := serve(t, Options{})
	mail := ts.URL + "/mail/settings"
	post(t, "PUT", mail+"/vacation", map[string]any{"enableAutoReply": true, "responseSubject": "Away", "responseBodyPlainText": "Back on Monday."}, nil)
	var vac map[string]any
	getJSON(t, mail+"/vacation", &vac)
	if vac["enableAutoReply"] != true || vac["responseSubject"] != "Away" {
		t.Errorf("vacation: %v", vac)
	}
	for _, tt := range []struct {
		method, path string
		body         map[string]any
		status       int
	}{
		{"PUT", "/autoForwarding", map[string]any{"enabled": true, "emailAddress": "stranger@example.org"}, 400},
		{"PUT", "/autoForwarding", map[string]any{"enabled": true, "emailAddress": "jordan.personal@mailbox.example"}, 200},
		{"PUT", "/imap", map[string]any{"maxFolderSize": 1234}, 400},
		{"PUT", "/pop", map[string]any{"accessWindow": "sometimes"}, 400},
		{"PUT", "/language", map[string]any{"displayLanguage": "Portuguese"}, 400},
		{"PUT", "/vacation", map[string]any{"enableAutoReply": "yes please"}, 400},
		{"DELETE", "/sendAs/jordan.lee@acme.example", nil, 400},
		{"POST", "/delegates", map[string]any{"delegateEmail": "sam@acme.example"}, 409},
		{"POST", "/filters", map[string]any{"criteria": map[string]any{"from": "x@y.example"}, "action": map[string]any{"addLabelIds": []string{"Label_404"}}}, 400},
		{"DELETE", "/forwardingAddresses/jordan.personal@mailbox.example", nil, 204},
	} {
		status, _, b := call(t, tt.method, mail+tt.path, tt.body)
		if status != tt.status {
			t.Errorf("%s %s %v: %d %s", tt.method, tt.path, tt.body, status, b)
		}
	}
	var fwd map[string]any
	getJSON(t, mail+"/autoForwarding", &fwd)
	if fwd["enabled"] != false {
		t.Errorf("removing the forwarding address left auto-forwarding on: %v", fwd)
	}
}

func TestMailQuery(t *testing.T) {
	st := newMailState(time.Now)
	since := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		q    string
		each func(*mailMessage) bool
	}{
		{"is:unread", func(m *mailMessage) bool { return m.has("UNREAD") }},
		{"has:attachment", func(m *mailMessage) bool { return len(m.Attachments) > 0 }},
		{"label:Receipts -is:unread", func(m *mailMessage) bool { return m.has("Label_1") && !m.has("UNREAD") }},
		{`subject:"Q3 roadmap"`, func(m *mailMessage) bool { return strings.Contains(m.Subject, "Q3 roadmap") }},
		{"after:2025/06/01", func(m *mailMessage) bool { return !m.date.Before(since) }},
		{"in:spam", func(m *mailMessage) bool { return m.has("SPAM") }},
		{"filename:pdf from:no-reply", func(m *mailMessage) bool { return strings.Contains(m.From, "no-reply") }},
		{"category:promotions", func(m *mailMessage) bool { return m.has("CATEGORY_PROMOTIONS") }},
	}
	for _, tt := range tests {
		got, err := st.search(args{q: url.Values{"q": {tt.q}}})
		if err != nil {
			t.Fatalf("%q: %v", tt.q, err)
		}
		if len(got) == 0 {
			t.Errorf("%q matches nothing", tt.q)
		}
		for _, m := range got {
			if !tt.each(m) {
				t.Errorf("%q matched %s (%s, %v)", tt.q, m.ID, m.Subject, m.LabelIDs)
				break
			}
			if tt.q != "in:spam" && (m.has("SPAM") || m.has("TRASH")) {
				t.Errorf("%q returned spam or trash without asking", tt.q)
			}
		}
	}
	for _, bad := range []string{"is:bogus", "after:yesterday", "has:kittens", "newer_than:3x"} {
		if _, err := st.search(args{q: url.Values{"q": {bad}}}); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

func TestCRM(t *testing.T) {
	_, ts := serve(t, Options{})
	crm := ts.URL + "/crm"
	var c crmObject
	post(t, "POST", crm+"/contacts", map[string]any{"email": "new@hooli.example", "firstname": "Ana", "lifecyclestage": "lead"}, &c)
	var got crmObject
	getJSON(t, crm+"/contacts/"+c.ID, &got)
	if got.Properties["firstname"] != "Ana" {
		t.Errorf("created contact: %+v", got)
	}
	if status, _, _ := call(t, "POST", crm+"/contacts", map[string]any{"email": "NEW@hooli.example"}); status != http.StatusConflict {
		t.Errorf("duplicate email: %d", status)
	}
	if status, _, _ := call(t, "PATCH", crm+"/deals/7001", map[string]any{"dealstage": "renewed", "pipeline": "sales"}); status != http.StatusBadRequest {
		t.Errorf("stage outside the pipeline: %d", status)
	}
	var deal crmObject
	post(t, "PATCH", crm+"/deals/7001", map[string]any{"dealstage": "closedwon", "pipeline": "sales", "amount": 12500}, &deal)
	if deal.Properties["dealstage"] != "closedwon" || deal.Properties["amount"] != "12500" {
		t.Errorf("updated deal: %+v", deal.Properties)
	}
	var search crmPage[crmObject]
	post(t, "POST", crm+"/contacts/search", map[string]any{"query": "hooli", "limit": 2}, &search)
	if search.Total == nil || *search.Total < 2 || len(search.Results) != 2 || search.Paging == nil {
		t.Errorf("search: total %v, %d results, paging %v", search.Total, len(search.Results), search.Paging)
	}
	var walked []crmObject
	after := ""
	for {
		var page crmPage[crmObject]
		getJSON(t, withQuery(crm+"/contacts", "limit", "100", "after", after), &page)
		walked = append(walked, page.Results...)
		if page.Paging == nil {
			break
		}
		after = page.Paging.Next.After
	}
	if len(walked) != 241 {
		t.Errorf("walked %d contacts, want 241", len(walked))
	}
}

func TestCalendar(t *testing.T) {
	now := time.Date(2025, 6, 4, 16, 0, 0, 0, time.UTC) // a Wednesday
	_, ts := serve(t, Options{Now: func() time.Time { return now }})
	cal := ts.URL + "/calendar"
	for _, tt := range []struct{ text, start, end, summary string }{
		{"Lunch with Sam tomorrow at 12:30pm for 45 minutes", "2025-06-05T12:30:00Z", "2025-06-05T13:15:00Z", "Lunch with Sam"},
		{"Board prep on friday at 9", "2025-06-06T09:00:00Z", "2025-06-06T10:00:00Z", "Board prep"},
		{"Dentist 2025-07-01 at 3pm for 2 hours", "2025-07-01T15:00:00Z", "2025-07-01T17:00:00Z", "Dentist"},
	} {
		var e calEvent
		post(t, "POST", cal+"/calendars/primary/events/quickAdd", map[string]any{"text": tt.text}, &e)
		if got := []string{e.Start.DateTime, e.End.DateTime, e.Summary}; !slices.Equal(got, []string{tt.start, tt.end, tt.summary}) {
			t.Errorf("%q: got %v", tt.text, got)
		}
	}
	var e calEvent
	post(t, "POST", cal+"/calendars/primary/events", map[string]any{"summary": "Demo", "start": "2025-06-10T10:00:00Z", "end": "2025-06-10T11:00:00Z", "attendees": []string{"kofi@acme.example"}}, &e)
	post(t, "PATCH", cal+"/calendars/primary/events/"+e.ID, map[string]any{"start": "2025-06-10T14:00:00Z"}, &e)
	if e.End.DateTime != "2025-06-10T15:00:00Z" {
		t.Errorf("moving the start should keep the duration: %+v", e.End)
	}
	var fb struct {
		Calendars map[string]struct {
			Busy []struct{ Start, End string } `json:"busy"`
		} `json:"calendars"`
	}
	post(t, "POST", cal+"/freeBusy", map[string]any{"timeMin": "2025-06-10T13:00:00Z", "timeMax": "2025-06-10T18:00:00Z"}, &fb)
	if !slices.ContainsFunc(fb.Calendars["primary"].Busy, func(b struct{ Start, End string }) bool { return b.Start == "2025-06-10T14:00:00Z" }) {
		t.Errorf("free/busy misses the new event: %+v", fb)
	}
	if status, _, b := call(t, "POST", cal+"/calendars/holidays@acme.example/events/quickAdd", map[string]any{"text": "Party"}); status != http.StatusForbidden {
		t.Errorf("writing a read-only calendar: %d %s", status, b)
	}
	post(t, "DELETE", cal+"/calendars/primary/events/"+e.ID, nil, nil)
	if status, _, _ := call(t, "GET", cal+"/calendars/primary/events/"+e.ID, nil); status != http.StatusNotFound {
		t.Errorf("deleted event still there: %d", status)
	}
}

func TestChatSend(t *testing.T) {
	now := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	_, ts := serve(t, Options{Now: func() time.Time { return now }})
	var sent struct {
		OK      bool        `json:"ok"`
		Message chatMessage `json:"message"`
	}
	post(t, "POST", ts.URL+"/chat/conversations/conv_09/messages", map[string]any{"text": "Your order has shipped 📦"}, &sent)
	var convs struct {
		Conversations []chatConversation `json:"conversations"`
	}
	getJSON(t, ts.URL+"/chat/conversations?limit=1", &convs)
	var msgs struct {
		Messages []chatMessage `json:"messages"`
	}
	getJSON(t, ts.URL+"/chat/conversations/conv_09/messages?limit=1", &msgs)
	if !sent.OK || convs.Conversations[0].ID != "conv_09" || msgs.Messages[0].ID != sent.Message.ID || msgs.Messages[0].Direction != "outbound" {
		t.Errorf("sent %+v; top conversation %+v; latest message %+v", sent, convs.Conversations, msgs.Messages)
	}
	if status, _, _ := call(t, "POST", ts.URL+"/chat/conversations/conv_99/messages", map[string]any{"text": "hi"}); status != http.StatusNotFound {
		t.Errorf("unknown conversation: %d", status)
	}
	if status, _, _ := call(t, "POST", ts.URL+"/chat/conversations/conv_09/messages", map[string]any{}); status != http.StatusBadRequest {
		t.Errorf("no text: %d", status)
	}
}

func TestToolkitBadInput(t *testing.T) {
	_, ts := serve(t, Options{})
	for _, tt := range []struct {
		method, path string
		body         string
		status       int
	}{
		{"POST", "/mail/messages/send", `[1,2]`, 400},
		{"POST", "/mail/messages/send", `{"to":"not an address","subject":"x"}`, 400},
		{"GET", "/mail/messages?pageToken=forged", "", 400},
		{"GET", "/mail/messages?maxResults=0", "", 400},
		{"GET", "/mail/messages/0000", "", 404},
		{"GET", "/calendar/calendars/primary/events?timeMin=tuesday", "", 400},
		{"GET", "/crm/contacts?after=bogus", "", 400},
	} {
		req, _ := http.NewRequest(tt.method, ts.URL+tt.path, strings.NewReader(tt.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.status {
			t.Errorf("%s %s %s: %d, want %d", tt.method, tt.path, tt.body, resp.StatusCode, tt.status)
		}
	}
}
