package demo

import (
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

func (s *Server) routeMailSettings(m func(string, func(*mailState, args, *http.Request) (any, error))) {
	m("GET /drafts", (*mailState).listDrafts)
	m("POST /drafts", (*mailState).createDraft)
	m("GET /drafts/{draftId}", (*mailState).getDraft)
	m("PUT /drafts/{draftId}", (*mailState).updateDraft)
	m("POST /drafts/{draftId}/send", (*mailState).sendDraft)
	m("DELETE /drafts/{draftId}", (*mailState).deleteDraft)
	m("GET /labels", (*mailState).listLabels)
	m("POST /labels", (*mailState).createLabel)
	m("GET /labels/{labelId}", (*mailState).getLabel)
	m("PATCH /labels/{labelId}", (*mailState).updateLabel)
	m("DELETE /labels/{labelId}", (*mailState).deleteLabel)
	m("GET /settings/filters", (*mailState).listFilters)
	m("POST /settings/filters", (*mailState).createFilter)
	m("GET /settings/filters/{filterId}", (*mailState).getFilter)
	m("DELETE /settings/filters/{filterId}", (*mailState).deleteFilter)
	m("GET /settings/vacation", func(st *mailState, _ args, _ *http.Request) (any, error) { return st.vacation, nil })
	m("PUT /settings/vacation", (*mailState).updateVacation)
	m("GET /settings/autoForwarding", func(st *mailState, _ args, _ *http.Request) (any, error) { return st.autoFwd, nil })
	m("PUT /settings/autoForwarding", (*mailState).updateAutoForwarding)
	m("GET /settings/forwardingAddresses", (*mailState).listForwardingAddresses)
	m("POST /settings/forwardingAddresses", (*mailState).createForwardingAddress)
	m("DELETE /settings/forwardingAddresses/{forwardingEmail}", (*mailState).deleteForwardingAddress)
	m("GET /settings/imap", func(st *mailState, _ args, _ *http.Request) (any, error) { return st.imap, nil })
	m("PUT /settings/imap", (*mailState).updateIMAP)
	m("GET /settings/pop", func(st *mailState, _ args, _ *http.Request) (any, error) { return st.pop, nil })
	m("PUT /settings/pop", (*mailState).updatePOP)
	m("GET /settings/language", func(st *mailState, _ args, _ *http.Request) (any, error) {
		return map[string]string{"displayLanguage": st.language}, nil
	})
	m("PUT /settings/language", (*mailState).updateLanguage)
	m("GET /settings/sendAs", (*mailState).listSendAs)
	m("POST /settings/sendAs", (*mailState).createSendAs)
	m("GET /settings/sendAs/{sendAsEmail}", func(st *mailState, _ args, r *http.Request) (any, error) {
		return st.alias(r.PathValue("sendAsEmail"))
	})
	m("PATCH /settings/sendAs/{sendAsEmail}", (*mailState).updateSendAs)
	m("DELETE /settings/sendAs/{sendAsEmail}", (*mailState).deleteSendAs)
	m("GET /settings/signature", (*mailState).getSignature)
	m("PUT /settings/signature", (*mailState).updateSignature)
	m("GET /settings/delegates", (*mailState).listDelegates)
	m("POST /settings/delegates", (*mailState).addDelegate)
	m("DELETE /settings/delegates/{delegateEmail}", (*mailState).removeDelegate)
}

func notFoundErr(kind, id string) error {
	return errf(http.StatusNotFound, "Requested entity was not found: %s %q.", kind, id)
}

// --- drafts

type draftView struct {
	ID      string `json:"id"`
	Message any    `json:"message"`
}

func (st *mailState) draft(id string) (*mailMessage, error) {
	if mid, ok := st.drafts[id]; ok {
		return st.byID[mid], nil
	}
	return nil, notFoundErr("draft", id)
}

func (st *mailState) listDrafts(a args, _ *http.Request) (any, error) {
	q, err := st.parseQuery(a.str("q"))
	if err != nil {
		return nil, err
	}
	type draftMsg struct {
		ID       string   `json:"id"`
		ThreadID string   `json:"threadId"`
		To       []string `json:"to"`
		Subject  string   `json:"subject"`
		Snippet  string   `json:"snippet"`
	}
	all := []draftView{}
	for _, id := range st.draftIDs {
		m := st.byID[st.drafts[id]]
		if q.match(m) {
			all = append(all, draftView{id, draftMsg{m.ID, m.ThreadID, m.To, m.Subject, m.Snippet}})
		}
	}
	page, next, err := paginate(st.codec, a, "maxResults", "pageToken", 100, 500, all)
	if err != nil {
		return nil, err
	}
	return struct {
		Drafts             []draftView `json:"drafts"`
		NextPageToken      string      `json:"nextPageToken,omitempty"`
		ResultSizeEstimate int         `json:"resultSizeEstimate"`
	}{page, next, len(all)}, nil
}

func (st *mailState) createDraft(a args, _ *http.Request) (any, error) {
	m, err := st.compose(a, false)
	if err != nil {
		return nil, err
	}
	st.deliver(m, "DRAFT")
	id := "r-" + strconv.FormatUint((st.seq*0x9e3779b97f4a7c15)>>1, 10)
	st.drafts[id] = m.ID
	st.draftIDs = slices.Insert(st.draftIDs, 0, id)
	return draftView{id, m.ref()}, nil
}

func (st *mailState) getDraft(a args, r *http.Request) (any, error) {
	id := r.PathValue("draftId")
	m, err := st.draft(id)
	if err != nil {
		return nil, err
	}
	v, err := view(m, a.str("format"))
	return draftView{id, v}, err
}

func (st *mailState) updateDraft(a args, r *http.Request) (any, error) {
	id := r.PathValue("draftId")
	m, err := st.draft(id)
	if err != nil {
		return nil, err
	}
	upd, err := st.compose(a, false)
	if err != nil {
		return nil, err
	}
	if a.has("to") {
		m.To = upd.To
	}
	if a.has("cc") {
		m.Cc = upd.Cc
	}
	if a.has("bcc") {
		m.Bcc = upd.Bcc
	}
	if a.has("subject") {
		m.Subject = upd.Subject
	}
	if a.has("messageBody") {
		m.Body = upd.Body
	}
	m.date = st.now().UTC()
	m.finish(0)
	m.HistoryID = st.record(historyRecord{Messages: []msgRef{m.ref()}})
	return draftView{id, m}, nil
}

func (st *mailState) sendDraft(_ args, r *http.Request) (any, error) {
	id := r.PathValue("draftId")
	m, err := st.draft(id)
	if err != nil {
		return nil, err
	}
	if len(m.To)+len(m.Cc)+len(m.Bcc) == 0 {
		return nil, errf(http.StatusBadRequest, "Recipient address required: update the draft with a to address first.")
	}
	st.remove(m.ID)
	delete(st.drafts, id)
	st.draftIDs = slices.DeleteFunc(st.draftIDs, func(d string) bool { return d == id })
	m.ThreadID = ""
	return st.deliver(m, "SENT"), nil
}

func (st *mailState) deleteDraft(_ args, r *http.Request) (any, error) {
	m, err := st.draft(r.PathValue("draftId"))
	if err == nil {
		st.erase([]*mailMessage{m})
	}
	return nil, err
}

// --- labels

type labelDetail struct {
	*mailLabel
	MessagesTotal  int `json:"messagesTotal"`
	MessagesUnread int `json:"messagesUnread"`
	ThreadsTotal   int `json:"threadsTotal"`
	ThreadsUnread  int `json:"threadsUnread"`
}

func (st *mailState) listLabels(a args, _ *http.Request) (any, error) {
	page, next, err := paginate(st.codec, a, "maxResults", "pageToken", 100, 500, st.labels)
	if err != nil {
		return nil, err
	}
	return struct {
		Labels        []*mailLabel `json:"labels"`
		NextPageToken string       `json:"nextPageToken,omitempty"`
	}{page, next}, nil
}

func (st *mailState) labelByID(id string) (*mailLabel, error) {
	if l := st.label(id); l != nil {
		return l, nil
	}
	return nil, notFoundErr("label", id)
}

func (st *mailState) getLabel(_ args, r *http.Request) (any, error) {
	l, err := st.labelByID(r.PathValue("labelId"))
	if err != nil {
		return nil, err
	}
	d := labelDetail{mailLabel: l}
	threads, unread := map[string]bool{}, map[string]bool{}
	for _, m := range st.msgs {
		if m.has(l.ID) {
			d.MessagesTotal++
			threads[m.ThreadID] = true
			if m.has("UNREAD") {
				d.MessagesUnread++
				unread[m.ThreadID] = true
			}
		}
	}
	d.ThreadsTotal, d.ThreadsUnread = len(threads), len(unread)
	return d, nil
}

func (st *mailState) applyLabelFields(l *mailLabel, a args) error {
	if v := a.str("messageListVisibility"); v != "" {
		if v != "show" && v != "hide" {
			return errf(http.StatusBadRequest, "Invalid messageListVisibility %q: use show or hide.", v)
		}
		l.MessageListVisibility = v
	}
	if v := a.str("labelListVisibility"); v != "" {
		if !slices.Contains([]string{"labelShow", "labelShowIfUnread", "labelHide"}, v) {
			return errf(http.StatusBadRequest, "Invalid labelListVisibility %q: use labelShow, labelShowIfUnread or labelHide.", v)
		}
		l.LabelListVisibility = v
	}
	if c := a.object("color"); c != nil {
		l.Color = &labelColor{TextColor: scalar(c["textColor"]), BackgroundColor: scalar(c["backgroundColor"])}
	}
	return nil
}

func (st *mailState) createLabel(a args, _ *http.Request) (any, error) {
	name, err := a.required("name")
	if err != nil {
		return nil, err
	}
	if st.label(name) != nil {
		return nil, errf(http.StatusConflict, "Label name exists or conflicts: %q.", name)
	}
	st.seq++
	l := &mailLabel{ID: fmt.Sprintf("Label_%d", st.seq), Name: name, Type: "user", MessageListVisibility: "show", LabelListVisibility: "labelShow"}
	if err := st.applyLabelFields(l, a); err != nil {
		return nil, err
	}
	st.labels = append(st.labels, l)
	return l, nil
}

func (st *mailState) updateLabel(a args, r *http.Request) (any, error) {
	l, err := st.labelByID(r.PathValue("labelId"))
	if err != nil {
		return nil, err
	}
	if l.Type == "system" {
		return nil, errf(http.StatusBadRequest, "Invalid update for system label %s.", l.ID)
	}
	if name := a.str("name"); name != "" {
		if o := st.label(name); o != nil && o != l {
			return nil, errf(http.StatusConflict, "Label name exists or conflicts: %q.", name)
		}
		l.Name = name
	}
	return l, st.applyLabelFields(l, a)
}

func (st *mailState) deleteLabel(_ args, r *http.Request) (any, error) {
	l, err := st.labelByID(r.PathValue("labelId"))
	if err != nil {
		return nil, err
	}
	if l.Type == "system" {
		return nil, errf(http.StatusBadRequest, "Invalid delete request: %s is a system label.", l.ID)
	}
	for _, m := range st.msgs {
		m.removeLabel(l.ID)
	}
	st.labels = slices.DeleteFunc(st.labels, func(x *mailLabel) bool { return x == l })
	return nil, nil
}

// --- filters

func (st *mailState) listFilters(a args, _ *http.Request) (any, error) {
	page, next, err := paginate(st.codec, a, "maxResults", "pageToken", 100, 500, st.filters)
	if err != nil {
		return nil, err
	}
	return struct {
		Filter        []*mailFilter `json:"filter"`
		NextPageToken string        `json:"nextPageToken,omitempty"`
	}{page, next}, nil
}

func (st *mailState) filter(id string) (int, error) {
	if i := slices.IndexFunc(st.filters, func(f *mailFilter) bool { return f.ID == id }); i >= 0 {
		return i, nil
	}
	return -1, notFoundErr("filter", id)
}

func (st *mailState) createFilter(a args, _ *http.Request) (any, error) {
	crit, act := a.object("criteria"), a.object("action")
	if len(crit) == 0 || len(act) == 0 {
		return nil, errf(http.StatusBadRequest, "A filter needs criteria (from, to, subject, query, hasAttachment…) and an action (addLabelIds, removeLabelIds, forward).")
	}
	for k := range crit {
		if !slices.Contains([]string{"from", "to", "subject", "query", "negatedQuery", "hasAttachment", "excludeChats", "size", "sizeComparison"}, k) {
			return nil, errf(http.StatusBadRequest, "Unknown filter criterion %q.", k)
		}
	}
	for _, k := range []string{"addLabelIds", "removeLabelIds"} {
		ids, _ := act[k].([]any)
		for _, id := range ids {
			if st.label(scalar(id)) == nil {
				return nil, errf(http.StatusBadRequest, "Invalid label in %s: %v", k, id)
			}
		}
	}
	if fwd := scalar(act["forward"]); fwd != "" && !st.forwardingAccepted(fwd) {
		return nil, errf(http.StatusBadRequest, "Invalid forward address %q: verify it as a forwarding address first.", fwd)
	}
	st.seq++
	f := &mailFilter{ID: fmt.Sprintf("ANe1Bmj%d", st.seq), Criteria: crit, Action: act}
	st.filters = append(st.filters, f)
	return f, nil
}

func (st *mailState) getFilter(_ args, r *http.Request) (any, error) {
	i, err := st.filter(r.PathValue("filterId"))
	if err != nil {
		return nil, err
	}
	return st.filters[i], nil
}

func (st *mailState) deleteFilter(_ args, r *http.Request) (any, error) {
	i, err := st.filter(r.PathValue("filterId"))
	if err == nil {
		st.filters = slices.Delete(st.filters, i, i+1)
	}
	return nil, err
}

// --- settings

// setFields copies the given arguments into a settings object: bools are
// parsed, enums checked (allowed values after the name, "bool" or "int").
func setFields(dst map[string]any, a args, spec map[string][]string) error {
	for name, allowed := range spec {
		if !a.has(name) {
			continue
		}
		switch {
		case len(allowed) == 1 && allowed[0] == "bool":
			v, _, err := a.boolean(name)
			if err != nil {
				return err
			}
			dst[name] = v
		case len(allowed) == 1 && allowed[0] == "int":
			v, err := a.integer(name, 0)
			if err != nil {
				return err
			}
			dst[name] = v
		case len(allowed) > 0 && !slices.Contains(allowed, a.str(name)):
			return errf(http.StatusBadRequest, "Invalid %s %q: use one of %s.", name, a.str(name), strings.Join(allowed, ", "))
		default:
			dst[name] = a.str(name)
		}
	}
	return nil
}

func (st *mailState) updateVacation(a args, _ *http.Request) (any, error) {
	next := maps.Clone(st.vacation)
	err := setFields(next, a, map[string][]string{"enableAutoReply": {"bool"}, "responseSubject": nil,
		"responseBodyPlainText": nil, "responseBodyHtml": nil, "restrictToContacts": {"bool"},
		"restrictToDomain": {"bool"}, "startTime": {"int"}, "endTime": {"int"}})
	if err != nil {
		return nil, err
	}
	if s, e := next["startTime"], next["endTime"]; s != nil && e != nil && s.(int) > e.(int) {
		return nil, errf(http.StatusBadRequest, "Invalid vacation window: startTime is after endTime.")
	}
	st.vacation = next
	return next, nil
}

func (st *mailState) forwardingAccepted(email string) bool {
	return slices.ContainsFunc(st.fwdAddrs, func(f map[string]string) bool {
		return strings.EqualFold(f["forwardingEmail"], email) && f["verificationStatus"] == "accepted"
	})
}

func (st *mailState) updateAutoForwarding(a args, _ *http.Request) (any, error) {
	next := maps.Clone(st.autoFwd)
	err := setFields(next, a, map[string][]string{"enabled": {"bool"}, "emailAddress": nil,
		"disposition": {"leaveInInbox", "archive", "trash", "markRead"}})
	if err != nil {
		return nil, err
	}
	if on, _ := next["enabled"].(bool); on {
		addr, _ := next["emailAddress"].(string)
		if !st.forwardingAccepted(addr) {
			return nil, errf(http.StatusBadRequest, "Invalid emailAddress %q: auto-forwarding needs a verified forwarding address.", addr)
		}
		if next["disposition"] == nil {
			next["disposition"] = "leaveInInbox"
		}
	}
	st.autoFwd = next
	return next, nil
}

func (st *mailState) listForwardingAddresses(a args, _ *http.Request) (any, error) {
	page, next, err := paginate(st.codec, a, "maxResults", "pageToken", 100, 500, st.fwdAddrs)
	if err != nil {
		return nil, err
	}
	return struct {
		ForwardingAddresses []map[string]string `json:"forwardingAddresses"`
		NextPageToken       string              `json:"nextPageToken,omitempty"`
	}{page, next}, nil
}

func requiredEmail(a args, name string) (string, error) {
	v, err := a.required(name)
	if err != nil {
		return "", err
	}
	if !emailRE.MatchString(v) {
		return "", errf(http.StatusBadRequest, "Invalid %s: %q is not an email address.", name, v)
	}
	return v, nil
}

func (st *mailState) createForwardingAddress(a args, _ *http.Request) (any, error) {
	email, err := requiredEmail(a, "forwardingEmail")
	if err != nil {
		return nil, err
	}
	if slices.ContainsFunc(st.fwdAddrs, func(f map[string]string) bool { return strings.EqualFold(f["forwardingEmail"], email) }) {
		return nil, errf(http.StatusConflict, "Forwarding address %q already exists.", email)
	}
	f := map[string]string{"forwardingEmail": email, "verificationStatus": "pending"}
	st.fwdAddrs = append(st.fwdAddrs, f)
	return f, nil
}

func (st *mailState) deleteForwardingAddress(_ args, r *http.Request) (any, error) {
	email := r.PathValue("forwardingEmail")
	i := slices.IndexFunc(st.fwdAddrs, func(f map[string]string) bool { return strings.EqualFold(f["forwardingEmail"], email) })
	if i < 0 {
		return nil, notFoundErr("forwarding address", email)
	}
	st.fwdAddrs = slices.Delete(st.fwdAddrs, i, i+1)
	if addr, _ := st.autoFwd["emailAddress"].(string); strings.EqualFold(addr, email) {
		st.autoFwd = map[string]any{"enabled": false}
	}
	return nil, nil
}

func (st *mailState) updateIMAP(a args, _ *http.Request) (any, error) {
	next := maps.Clone(st.imap)
	err := setFields(next, a, map[string][]string{"enabled": {"bool"}, "autoExpunge": {"bool"},
		"expungeBehavior": {"archive", "trash", "deleteForever"}, "maxFolderSize": {"int"}})
	if err != nil {
		return nil, err
	}
	if n := next["maxFolderSize"].(int); !slices.Contains([]int{0, 1000, 2000, 5000, 10000}, n) {
		return nil, errf(http.StatusBadRequest, "Invalid maxFolderSize %d: use 0 (no limit), 1000, 2000, 5000 or 10000.", n)
	}
	st.imap = next
	return next, nil
}

func (st *mailState) updatePOP(a args, _ *http.Request) (any, error) {
	next := maps.Clone(st.pop)
	err := setFields(next, a, map[string][]string{"accessWindow": {"disabled", "fromNowOn", "allMail"},
		"disposition": {"leaveInInbox", "archive", "trash", "markRead"}})
	if err != nil {
		return nil, err
	}
	st.pop = next
	return next, nil
}

var langRE = regexp.MustCompile(`^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$`)

func (st *mailState) updateLanguage(a args, _ *http.Request) (any, error) {
	lang, err := a.required("displayLanguage")
	if err != nil {
		return nil, err
	}
	if !langRE.MatchString(lang) {
		return nil, errf(http.StatusBadRequest, "Invalid displayLanguage %q: use a BCP 47 tag such as en, en-GB or pt-BR.", lang)
	}
	st.language = lang
	return map[string]string{"displayLanguage": lang}, nil
}

func (st *mailState) listSendAs(a args, _ *http.Request) (any, error) {
	page, next, err := paginate(st.codec, a, "maxResults", "pageToken", 100, 500, st.sendAs)
	if err != nil {
		return nil, err
	}
	return struct {
		SendAs        []*sendAs `json:"sendAs"`
		NextPageToken string    `json:"nextPageToken,omitempty"`
	}{page, next}, nil
}

func (st *mailState) alias(email string) (*sendAs, error) {
	for _, s := range st.sendAs {
		if strings.EqualFold(s.SendAsEmail, email) {
			return s, nil
		}
	}
	return nil, notFoundErr("send-as alias", email)
}

func (st *mailState) createSendAs(a args, _ *http.Request) (any, error) {
	email, err := requiredEmail(a, "sendAsEmail")
	if err != nil {
		return nil, err
	}
	if _, err := st.alias(email); err == nil {
		return nil, errf(http.StatusConflict, "Send-as alias %q already exists.", email)
	}
	alias := &sendAs{SendAsEmail: email, DisplayName: a.str("displayName"), ReplyToAddress: a.str("replyToAddress"),
		Signature: a.str("signature"), TreatAsAlias: true, VerificationStatus: "pending"}
	if strings.HasSuffix(email, "@acme.example") {
		alias.VerificationStatus = "accepted"
	}
	if v, set, err := a.boolean("treatAsAlias"); err != nil {
		return nil, err
	} else if set {
		alias.TreatAsAlias = v
	}
	st.sendAs = append(st.sendAs, alias)
	return alias, nil
}

func (st *mailState) updateSendAs(a args, r *http.Request) (any, error) {
	alias, err := st.alias(r.PathValue("sendAsEmail"))
	if err != nil {
		return nil, err
	}
	for name, dst := range map[string]*string{"displayName": &alias.DisplayName, "replyToAddress": &alias.ReplyToAddress, "signature": &alias.Signature} {
		if a.has(name) {
			*dst = a.str(name)
		}
	}
	if v, set, err := a.boolean("treatAsAlias"); err != nil {
		return nil, err
	} else if set {
		alias.TreatAsAlias = v
	}
	if v, _, err := a.boolean("isDefault"); err != nil {
		return nil, err
	} else if v {
		for _, s := range st.sendAs {
			s.IsDefault = s == alias
		}
	}
	return alias, nil
}

func (st *mailState) deleteSendAs(_ args, r *http.Request) (any, error) {
	alias, err := st.alias(r.PathValue("sendAsEmail"))
	if err != nil {
		return nil, err
	}
	if alias.IsPrimary {
		return nil, errf(http.StatusBadRequest, "The primary address cannot be deleted.")
	}
	st.sendAs = slices.DeleteFunc(st.sendAs, func(s *sendAs) bool { return s == alias })
	if !slices.ContainsFunc(st.sendAs, func(s *sendAs) bool { return s.IsDefault }) {
		st.sendAs[0].IsDefault = true
	}
	return nil, nil
}

func (st *mailState) signatureOf(a args) (*sendAs, error) {
	if email := a.str("sendAsEmail"); email != "" {
		return st.alias(email)
	}
	return st.sendAs[0], nil
}

func (st *mailState) getSignature(a args, _ *http.Request) (any, error) {
	alias, err := st.signatureOf(a)
	if err != nil {
		return nil, err
	}
	return map[string]string{"sendAsEmail": alias.SendAsEmail, "signature": alias.Signature}, nil
}

func (st *mailState) updateSignature(a args, _ *http.Request) (any, error) {
	alias, err := st.signatureOf(a)
	if err != nil {
		return nil, err
	}
	if !a.has("signature") {
		return nil, errf(http.StatusBadRequest, "Missing required argument \"signature\" (pass an empty string to remove it).")
	}
	alias.Signature = a.str("signature")
	return map[string]string{"sendAsEmail": alias.SendAsEmail, "signature": alias.Signature}, nil
}

func (st *mailState) listDelegates(a args, _ *http.Request) (any, error) {
	page, next, err := paginate(st.codec, a, "maxResults", "pageToken", 100, 500, st.delegates)
	if err != nil {
		return nil, err
	}
	return struct {
		Delegates     []map[string]string `json:"delegates"`
		NextPageToken string              `json:"nextPageToken,omitempty"`
	}{page, next}, nil
}

func (st *mailState) addDelegate(a args, _ *http.Request) (any, error) {
	email, err := requiredEmail(a, "delegateEmail")
	if err != nil {
		return nil, err
	}
	if slices.ContainsFunc(st.delegates, func(d map[string]string) bool { return strings.EqualFold(d["delegateEmail"], email) }) {
		return nil, errf(http.StatusConflict, "%q is already a delegate.", email)
	}
	d := map[string]string{"delegateEmail": email, "verificationStatus": "pending"}
	if strings.HasSuffix(email, "@acme.example") {
		d["verificationStatus"] = "accepted"
	}
	st.delegates = append(st.delegates, d)
	return d, nil
}

func (st *mailState) removeDelegate(_ args, r *http.Request) (any, error) {
	email := r.PathValue("delegateEmail")
	i := slices.IndexFunc(st.delegates, func(d map[string]string) bool { return strings.EqualFold(d["delegateEmail"], email) })
	if i < 0 {
		return nil, notFoundErr("delegate", email)
	}
	st.delegates = slices.Delete(st.delegates, i, i+1)
	return nil, nil
}
