package demo

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
)

func (s *Server) routeMail() {
	m := func(pattern string, h func(*mailState, args, *http.Request) (any, error)) {
		method, path, _ := strings.Cut(pattern, " ")
		handle(s.mux, method+" /mail"+path, s.mail, googleStyle, h)
	}
	m("GET /messages", (*mailState).listMessages)
	m("GET /messages/search", (*mailState).searchMessages)
	m("GET /messages/{messageId}", (*mailState).getMessage)
	m("POST /messages/send", (*mailState).sendMessage)
	m("POST /messages/import", (*mailState).importMessage)
	m("POST /messages/batchModify", (*mailState).batchModify)
	m("POST /messages/batchDelete", (*mailState).batchDelete)
	m("POST /messages/{messageId}/reply", (*mailState).reply)
	m("POST /messages/{messageId}/forward", (*mailState).forward)
	m("POST /messages/{messageId}/modify", (*mailState).modifyMessage)
	for _, c := range []struct {
		verb        string
		add, remove []string
	}{
		{"trash", []string{"TRASH"}, nil}, {"untrash", nil, []string{"TRASH"}},
		{"spam", []string{"SPAM"}, []string{"INBOX"}}, {"notSpam", []string{"INBOX"}, []string{"SPAM"}},
		{"markRead", nil, []string{"UNREAD"}}, {"markUnread", []string{"UNREAD"}, nil},
		{"star", []string{"STARRED"}, nil}, {"unstar", nil, []string{"STARRED"}},
	} {
		m("POST /messages/{messageId}/"+c.verb, func(st *mailState, _ args, r *http.Request) (any, error) {
			msg, err := st.message(r.PathValue("messageId"))
			if err != nil {
				return nil, err
			}
			return msg.ref(), st.relabel([]*mailMessage{msg}, c.add, c.remove)
		})
	}
	m("DELETE /messages/{messageId}", (*mailState).deleteMessage)
	m("GET /messages/{messageId}/attachments", (*mailState).listAttachments)
	m("GET /messages/{messageId}/attachments/{attachmentId}", (*mailState).getAttachment)
	m("GET /threads", (*mailState).listThreads)
	m("GET /threads/{threadId}", (*mailState).getThread)
	m("POST /threads/{threadId}/modify", func(st *mailState, a args, r *http.Request) (any, error) {
		return st.relabelThread(r.PathValue("threadId"), a.strs("addLabelIds"), a.strs("removeLabelIds"))
	})
	m("POST /threads/{threadId}/trash", func(st *mailState, _ args, r *http.Request) (any, error) {
		return st.relabelThread(r.PathValue("threadId"), []string{"TRASH"}, nil)
	})
	m("POST /threads/{threadId}/untrash", func(st *mailState, _ args, r *http.Request) (any, error) {
		return st.relabelThread(r.PathValue("threadId"), nil, []string{"TRASH"})
	})
	m("DELETE /threads/{threadId}", (*mailState).deleteThread)
	m("GET /history", (*mailState).listHistory)
	m("GET /profile", (*mailState).profile)
	m("GET /contacts", (*mailState).searchContacts)
	m("POST /trash/empty", func(st *mailState, _ args, _ *http.Request) (any, error) { return st.purge("TRASH"), nil })
	m("POST /spam/empty", func(st *mailState, _ args, _ *http.Request) (any, error) { return st.purge("SPAM"), nil })
	s.routeMailSettings(m)
}

type msgSummary struct {
	ID             string   `json:"id"`
	ThreadID       string   `json:"threadId"`
	LabelIDs       []string `json:"labelIds"`
	From           string   `json:"from"`
	Subject        string   `json:"subject"`
	Date           string   `json:"date"`
	Snippet        string   `json:"snippet"`
	HasAttachments bool     `json:"hasAttachments"`
}

func summarize(m *mailMessage) msgSummary {
	return msgSummary{m.ID, m.ThreadID, m.LabelIDs, m.From, m.Subject, m.Date, m.Snippet, len(m.Attachments) > 0}
}

type msgMinimal struct {
	ID           string   `json:"id"`
	ThreadID     string   `json:"threadId"`
	LabelIDs     []string `json:"labelIds"`
	Snippet      string   `json:"snippet"`
	HistoryID    string   `json:"historyId"`
	InternalDate string   `json:"internalDate"`
	SizeEstimate int      `json:"sizeEstimate"`
}

func view(m *mailMessage, format string) (any, error) {
	switch format {
	case "", "full":
		return m, nil
	case "metadata":
		c := *m
		c.Body = ""
		return c, nil
	case "minimal":
		return msgMinimal{m.ID, m.ThreadID, m.LabelIDs, m.Snippet, m.HistoryID, m.InternalDate, m.SizeEstimate}, nil
	}
	return nil, errf(http.StatusBadRequest, "Invalid format %q: use full, metadata or minimal.", format)
}

type messageList struct {
	Messages           []msgSummary `json:"messages"`
	NextPageToken      string       `json:"nextPageToken,omitempty"`
	ResultSizeEstimate int          `json:"resultSizeEstimate"`
}

func (st *mailState) listMessages(a args, _ *http.Request) (any, error) {
	all, err := st.search(a)
	if err != nil {
		return nil, err
	}
	page, next, err := paginate(st.codec, a, "maxResults", "pageToken", 100, 500, all)
	if err != nil {
		return nil, err
	}
	out := messageList{Messages: make([]msgSummary, len(page)), NextPageToken: next, ResultSizeEstimate: len(all)}
	for i, m := range page {
		out.Messages[i] = summarize(m)
	}
	return out, nil
}

func (st *mailState) searchMessages(a args, r *http.Request) (any, error) {
	if _, err := a.required("q"); err != nil {
		return nil, err
	}
	return st.listMessages(a, r)
}

func (st *mailState) getMessage(a args, r *http.Request) (any, error) {
	m, err := st.message(r.PathValue("messageId"))
	if err != nil {
		return nil, err
	}
	return view(m, a.str("format"))
}

var emailRE = regexp.MustCompile(`^[^@\s<>]+@[^@\s<>]+\.[^@\s<>]+$`)

// addressOf extracts the address from "Name <addr>" or returns s.
func addressOf(s string) string {
	if i := strings.LastIndexByte(s, '<'); i >= 0 && strings.HasSuffix(s, ">") {
		return s[i+1 : len(s)-1]
	}
	return strings.TrimSpace(s)
}

func recipients(a args, name string) ([]string, error) {
	list := a.strs(name)
	for _, r := range list {
		if !emailRE.MatchString(addressOf(r)) {
			return nil, errf(http.StatusBadRequest, "Invalid %s header: %q is not an email address.", name, r)
		}
	}
	return list, nil
}

// compose builds an outgoing message from the call's arguments.
func (st *mailState) compose(a args, needTo bool) (*mailMessage, error) {
	m := &mailMessage{From: "Jordan Lee <" + mailUser + ">", Subject: a.str("subject"), Body: a.str("messageBody")}
	var err error
	if m.To, err = recipients(a, "to"); err != nil {
		return nil, err
	}
	if m.Cc, err = recipients(a, "cc"); err != nil {
		return nil, err
	}
	if m.Bcc, err = recipients(a, "bcc"); err != nil {
		return nil, err
	}
	if needTo && len(m.To)+len(m.Cc)+len(m.Bcc) == 0 {
		return nil, errf(http.StatusBadRequest, "Recipient address required: give at least one of to, cc, bcc.")
	}
	if from := a.str("from"); from != "" {
		if !slices.ContainsFunc(st.sendAs, func(s *sendAs) bool { return s.SendAsEmail == addressOf(from) }) {
			return nil, errf(http.StatusBadRequest, "Invalid from address %q: it is not one of your send-as aliases.", from)
		}
		m.From = from
	}
	if tid := a.str("threadId"); tid != "" {
		msgs, err := st.thread(tid)
		if err != nil {
			return nil, err
		}
		m.ThreadID = tid
		if m.Subject == "" {
			m.Subject = "Re: " + strings.TrimPrefix(msgs[0].Subject, "Re: ")
		}
	}
	return m, nil
}

// deliver stamps and stores a message, recording it in the history.
func (st *mailState) deliver(m *mailMessage, labels ...string) msgRef {
	m.date = st.now().UTC()
	m.ID = st.nextID()
	if m.ThreadID == "" {
		m.ThreadID = m.ID
	}
	m.LabelIDs = labels
	m.finish(0)
	st.insert(m)
	m.HistoryID = st.record(historyRecord{Messages: []msgRef{m.ref()}, MessagesAdded: []historyMessage{{m.ref()}}})
	return m.ref()
}

func (st *mailState) sendMessage(a args, _ *http.Request) (any, error) {
	m, err := st.compose(a, true)
	if err != nil {
		return nil, err
	}
	if m.Subject == "" && m.Body == "" {
		return nil, errf(http.StatusBadRequest, "A message needs a subject or a messageBody.")
	}
	return st.deliver(m, "SENT"), nil
}

func (st *mailState) importMessage(a args, _ *http.Request) (any, error) {
	from, err := a.required("from")
	if err != nil {
		return nil, err
	}
	if !emailRE.MatchString(addressOf(from)) {
		return nil, errf(http.StatusBadRequest, "Invalid from header: %q is not an email address.", from)
	}
	to, err := recipients(a, "to")
	if err != nil {
		return nil, err
	}
	if len(to) == 0 {
		to = []string{mailUser}
	}
	labels := []string{"INBOX", "UNREAD"}
	if ls := a.strs("labelIds"); len(ls) > 0 {
		labels = nil
		for _, l := range ls {
			lb := st.label(l)
			if lb == nil {
				return nil, errf(http.StatusBadRequest, "Invalid label: %s", l)
			}
			labels = append(labels, lb.ID)
		}
	}
	return st.deliver(&mailMessage{From: from, To: to, Subject: a.str("subject"), Body: a.str("messageBody")}, labels...), nil
}

func (st *mailState) reply(a args, r *http.Request) (any, error) {
	orig, err := st.message(r.PathValue("messageId"))
	if err != nil {
		return nil, err
	}
	body, err := a.required("messageBody")
	if err != nil {
		return nil, err
	}
	to := []string{addressOf(orig.From)}
	if to[0] == mailUser {
		to = orig.To
	}
	m := &mailMessage{From: "Jordan Lee <" + mailUser + ">", To: to, ThreadID: orig.ThreadID, Body: body,
		Subject: "Re: " + strings.TrimPrefix(orig.Subject, "Re: ")}
	if all, _, err := a.boolean("replyAll"); err != nil {
		return nil, err
	} else if all {
		for _, x := range slices.Concat(orig.To, orig.Cc) {
			if addressOf(x) != mailUser && !slices.Contains(m.To, x) {
				m.Cc = append(m.Cc, x)
			}
		}
	}
	if m.Cc, err = appendRecipients(m.Cc, a, "cc"); err != nil {
		return nil, err
	}
	return st.deliver(m, "SENT"), nil
}

func appendRecipients(list []string, a args, name string) ([]string, error) {
	more, err := recipients(a, name)
	return append(list, more...), err
}

func (st *mailState) forward(a args, r *http.Request) (any, error) {
	orig, err := st.message(r.PathValue("messageId"))
	if err != nil {
		return nil, err
	}
	to, err := recipients(a, "to")
	if err != nil {
		return nil, err
	}
	if len(to) == 0 {
		return nil, errf(http.StatusBadRequest, "Missing required argument \"to\".")
	}
	m := &mailMessage{From: "Jordan Lee <" + mailUser + ">", To: to, Subject: "Fwd: " + orig.Subject,
		Body: fmt.Sprintf("%s\n\n---------- Forwarded message ---------\nFrom: %s\nDate: %s\nSubject: %s\n\n%s",
			a.str("messageBody"), orig.From, orig.Date, orig.Subject, orig.Body)}
	for _, at := range orig.Attachments {
		at.AttachmentID = "ANGjdJ" + st.nextID()
		m.Attachments = append(m.Attachments, at)
	}
	return st.deliver(m, "SENT"), nil
}

func (st *mailState) modifyMessage(a args, r *http.Request) (any, error) {
	m, err := st.message(r.PathValue("messageId"))
	if err != nil {
		return nil, err
	}
	return m.ref(), st.relabel([]*mailMessage{m}, a.strs("addLabelIds"), a.strs("removeLabelIds"))
}

func (st *mailState) messagesByID(a args) ([]*mailMessage, error) {
	ids := a.strs("ids")
	if len(ids) == 0 {
		return nil, errf(http.StatusBadRequest, "Missing required argument \"ids\".")
	}
	if len(ids) > 1000 {
		return nil, errf(http.StatusBadRequest, "Too many ids: at most 1000 per request.")
	}
	out := make([]*mailMessage, len(ids))
	for i, id := range ids {
		m, err := st.message(id)
		if err != nil {
			return nil, err
		}
		out[i] = m
	}
	return out, nil
}

func (st *mailState) batchModify(a args, _ *http.Request) (any, error) {
	msgs, err := st.messagesByID(a)
	if err != nil {
		return nil, err
	}
	return nil, st.relabel(msgs, a.strs("addLabelIds"), a.strs("removeLabelIds"))
}

func (st *mailState) erase(msgs []*mailMessage) {
	for _, m := range msgs {
		st.remove(m.ID)
		for id, mid := range st.drafts {
			if mid == m.ID {
				delete(st.drafts, id)
				st.draftIDs = slices.DeleteFunc(st.draftIDs, func(d string) bool { return d == id })
			}
		}
		st.record(historyRecord{Messages: []msgRef{m.ref()}, MessagesDeleted: []historyMessage{{m.ref()}}})
	}
}

func (st *mailState) batchDelete(a args, _ *http.Request) (any, error) {
	msgs, err := st.messagesByID(a)
	if err == nil {
		st.erase(msgs)
	}
	return nil, err
}

func (st *mailState) deleteMessage(_ args, r *http.Request) (any, error) {
	m, err := st.message(r.PathValue("messageId"))
	if err == nil {
		st.erase([]*mailMessage{m})
	}
	return nil, err
}

func (st *mailState) purge(label string) map[string]int {
	var doomed []*mailMessage
	for _, m := range st.msgs {
		if m.has(label) {
			doomed = append(doomed, m)
		}
	}
	st.erase(doomed)
	return map[string]int{"deletedMessages": len(doomed)}
}

func (st *mailState) listAttachments(a args, r *http.Request) (any, error) {
	m, err := st.message(r.PathValue("messageId"))
	if err != nil {
		return nil, err
	}
	page, next, err := paginate(st.codec, a, "maxResults", "pageToken", 100, 500, m.Attachments)
	if err != nil {
		return nil, err
	}
	return struct {
		Attachments   []mailAttachment `json:"attachments"`
		NextPageToken string           `json:"nextPageToken,omitempty"`
	}{page, next}, nil
}

func (st *mailState) getAttachment(_ args, r *http.Request) (any, error) {
	m, err := st.message(r.PathValue("messageId"))
	if err != nil {
		return nil, err
	}
	id := r.PathValue("attachmentId")
	i := slices.IndexFunc(m.Attachments, func(at mailAttachment) bool { return at.AttachmentID == id })
	if i < 0 {
		return nil, errf(http.StatusNotFound, "Requested entity was not found: attachment %q.", id)
	}
	at := m.Attachments[i]
	return map[string]any{"attachmentId": at.AttachmentID, "filename": at.Filename, "mimeType": at.MimeType,
		"size": at.Size, "data": base64.RawURLEncoding.EncodeToString(at.data)}, nil
}

type threadSummary struct {
	ID           string `json:"id"`
	Subject      string `json:"subject"`
	Snippet      string `json:"snippet"`
	HistoryID    string `json:"historyId"`
	MessageCount int    `json:"messageCount"`
}

func (st *mailState) listThreads(a args, _ *http.Request) (any, error) {
	hits, err := st.search(a)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	threads := []threadSummary{}
	for _, m := range hits {
		if seen[m.ThreadID] {
			continue
		}
		seen[m.ThreadID] = true
		msgs, _ := st.thread(m.ThreadID)
		threads = append(threads, threadSummary{m.ThreadID, strings.TrimPrefix(msgs[0].Subject, "Re: "), m.Snippet, m.HistoryID, len(msgs)})
	}
	page, next, err := paginate(st.codec, a, "maxResults", "pageToken", 100, 500, threads)
	if err != nil {
		return nil, err
	}
	return struct {
		Threads            []threadSummary `json:"threads"`
		NextPageToken      string          `json:"nextPageToken,omitempty"`
		ResultSizeEstimate int             `json:"resultSizeEstimate"`
	}{page, next, len(threads)}, nil
}

func (st *mailState) getThread(a args, r *http.Request) (any, error) {
	id := r.PathValue("threadId")
	msgs, err := st.thread(id)
	if err != nil {
		return nil, err
	}
	views := make([]any, len(msgs))
	for i, m := range msgs {
		if views[i], err = view(m, a.str("format")); err != nil {
			return nil, err
		}
	}
	return map[string]any{"id": id, "historyId": msgs[len(msgs)-1].HistoryID, "messages": views}, nil
}

func (st *mailState) relabelThread(id string, add, remove []string) (any, error) {
	msgs, err := st.thread(id)
	if err != nil {
		return nil, err
	}
	if err := st.relabel(msgs, add, remove); err != nil {
		return nil, err
	}
	refs := make([]msgRef, len(msgs))
	for i, m := range msgs {
		refs[i] = m.ref()
	}
	return map[string]any{"id": id, "messages": refs}, nil
}

func (st *mailState) deleteThread(_ args, r *http.Request) (any, error) {
	msgs, err := st.thread(r.PathValue("threadId"))
	if err == nil {
		st.erase(msgs)
	}
	return nil, err
}

func (st *mailState) listHistory(a args, _ *http.Request) (any, error) {
	start, err := a.integer("startHistoryId", -1)
	if err != nil {
		return nil, err
	}
	if start < 0 {
		return nil, errf(http.StatusBadRequest, "Missing required argument \"startHistoryId\" (take it from MAIL_GET_PROFILE or a message's historyId).")
	}
	types := a.strs("historyTypes")
	label := a.str("labelId")
	var recs []historyRecord
	for _, h := range st.history {
		var id int
		fmt.Sscan(h.ID, &id)
		if id <= start || !historyMatches(h, types, label) {
			continue
		}
		recs = append(recs, h)
	}
	page, next, err := paginate(st.codec, a, "maxResults", "pageToken", 100, 500, recs)
	if err != nil {
		return nil, err
	}
	return struct {
		History       []historyRecord `json:"history"`
		NextPageToken string          `json:"nextPageToken,omitempty"`
		HistoryID     string          `json:"historyId"`
	}{page, next, fmt.Sprint(st.historyID)}, nil
}

func historyMatches(h historyRecord, types []string, label string) bool {
	kinds := map[string]bool{"messageAdded": len(h.MessagesAdded) > 0, "messageDeleted": len(h.MessagesDeleted) > 0,
		"labelAdded": len(h.LabelsAdded) > 0, "labelRemoved": len(h.LabelsRemoved) > 0}
	ok := len(types) == 0
	for _, t := range types {
		ok = ok || kinds[t]
	}
	if label != "" {
		ok = ok && slices.ContainsFunc(h.Messages, func(m msgRef) bool { return slices.Contains(m.LabelIDs, label) })
	}
	return ok
}

func (st *mailState) profile(args, *http.Request) (any, error) {
	threads := map[string]bool{}
	for _, m := range st.msgs {
		threads[m.ThreadID] = true
	}
	return map[string]any{"emailAddress": mailUser, "messagesTotal": len(st.msgs), "threadsTotal": len(threads),
		"historyId": fmt.Sprint(st.historyID)}, nil
}

func (st *mailState) searchContacts(a args, _ *http.Request) (any, error) {
	q := a.str("query")
	hits := []mailContact{}
	for _, c := range st.contacts {
		if q == "" || containsFold(c.Name, q) || containsFold(c.EmailAddress, q) || containsFold(c.Company, q) {
			hits = append(hits, c)
		}
	}
	page, next, err := paginate(st.codec, a, "maxResults", "pageToken", 25, 100, hits)
	if err != nil {
		return nil, err
	}
	return struct {
		Contacts      []mailContact `json:"contacts"`
		NextPageToken string        `json:"nextPageToken,omitempty"`
	}{page, next}, nil
}
