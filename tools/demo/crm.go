package demo

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The CRM backend is HubSpot-like: objects carry their fields under
// "properties", lists page with limit + after and answer
// {"results":[…],"paging":{"next":{"after":…}}}.

type crmObject struct {
	ID           string              `json:"id"`
	Properties   map[string]string   `json:"properties"`
	Associations map[string][]string `json:"associations,omitempty"`
	CreatedAt    string              `json:"createdAt"`
	UpdatedAt    string              `json:"updatedAt"`
	Archived     bool                `json:"archived"`
}

type crmStage struct {
	ID           string  `json:"id"`
	Label        string  `json:"label"`
	DisplayOrder int     `json:"displayOrder"`
	Probability  float64 `json:"probability"`
}

type crmPipeline struct {
	ID     string     `json:"id"`
	Label  string     `json:"label"`
	Stages []crmStage `json:"stages"`
}

type crmNote struct {
	ID        string `json:"id"`
	Content   string `json:"content"`
	ContactID string `json:"contact_id,omitempty"`
	DealID    string `json:"deal_id,omitempty"`
	CreatedAt string `json:"createdAt"`
}

type crmState struct {
	now       func() time.Time
	codec     cursorCodec
	seq       int
	contacts  []*crmObject
	companies []*crmObject
	deals     []*crmObject
	notes     []crmNote // newest first
	pipelines []crmPipeline
}

var crmPipelines = []crmPipeline{
	{ID: "sales", Label: "Sales pipeline", Stages: []crmStage{
		{"appointmentscheduled", "Appointment scheduled", 0, 0.2}, {"qualifiedtobuy", "Qualified to buy", 1, 0.4},
		{"presentationscheduled", "Presentation scheduled", 2, 0.6}, {"contractsent", "Contract sent", 3, 0.9},
		{"closedwon", "Closed won", 4, 1}, {"closedlost", "Closed lost", 5, 0}}},
	{ID: "renewals", Label: "Renewals", Stages: []crmStage{
		{"renewal_due", "Renewal due", 0, 0.5}, {"renewal_negotiation", "In negotiation", 1, 0.75},
		{"renewed", "Renewed", 2, 1}, {"churned", "Churned", 3, 0}}},
}

var industries = []string{"Logistics", "Retail", "Manufacturing", "Hospitality", "Software", "Food & Beverage", "Media", "Healthcare"}

func newCRMState(now func() time.Time) *crmState {
	p := newPRNG(0xC3A)
	st := &crmState{now: now, codec: cursorCodec{key: []byte("crm-after-v1")}, pipelines: crmPipelines, seq: 9000}
	day := func(i, n int) time.Time {
		return dataEnd.AddDate(-2, 0, 0).Add(time.Duration(float64(dataEnd.Sub(dataEnd.AddDate(-2, 0, 0))) * float64(i) / float64(n)))
	}
	for i := 0; i < 48; i++ {
		name, pl := companies[i%len(companies)], pick(p, places)
		if i >= len(companies) {
			name += " " + pl.City
		}
		t := iso(day(i, 48))
		st.companies = append(st.companies, &crmObject{ID: strconv.Itoa(3001 + i), CreatedAt: t, UpdatedAt: t, Properties: map[string]string{
			"name": name, "domain": domainOf(name), "industry": pick(p, industries), "city": pl.City, "country": pl.Country,
			"numberofemployees": strconv.Itoa(p.between(8, 5000)), "annualrevenue": strconv.Itoa(p.between(2, 900) * 100000)}})
	}
	for i := 0; i < 240; i++ {
		fn, ln := pick(p, firstNames), pick(p, lastNames)
		co := st.companies[p.intn(len(st.companies))]
		t := iso(day(i, 240))
		st.contacts = append(st.contacts, &crmObject{ID: strconv.Itoa(5101 + i), CreatedAt: t, UpdatedAt: t,
			Properties: map[string]string{"firstname": fn, "lastname": ln, "email": emailLocal(fn, ln) + "@" + co.Properties["domain"],
				"phone": fmt.Sprintf("+%d %03d %04d", 1+p.intn(60), p.intn(1000), p.intn(10000)), "company": co.Properties["name"],
				"jobtitle":       pick(p, []string{"Head of Procurement", "Operations Manager", "CFO", "Office Manager", "Buyer", "CTO", "Founder"}),
				"lifecyclestage": weighted(p, []string{"lead", "marketingqualifiedlead", "salesqualifiedlead", "opportunity", "customer"}, []int{30, 15, 15, 15, 25})},
			Associations: map[string][]string{"companies": {co.ID}}})
	}
	for i := 0; i < 160; i++ {
		pipe := crmPipelines[0]
		if i%4 == 3 {
			pipe = crmPipelines[1]
		}
		c := st.contacts[p.intn(len(st.contacts))]
		t := day(i, 160)
		st.deals = append(st.deals, &crmObject{ID: strconv.Itoa(7001 + i), CreatedAt: iso(t), UpdatedAt: iso(t.Add(72 * time.Hour)),
			Properties: map[string]string{"dealname": c.Properties["company"] + " — " + pick(p, []string{"Anvil fleet", "Annual supply", "Pilot", "Renewal", "Expansion", "Skates bundle"}),
				"amount": strconv.Itoa(p.between(5, 400) * 250), "pipeline": pipe.ID, "dealstage": pick(p, pipe.Stages).ID,
				"closedate": t.AddDate(0, 0, p.between(14, 120)).Format(time.DateOnly), "owner": pick(p, supportAgents)},
			Associations: map[string][]string{"contacts": {c.ID}, "companies": c.Associations["companies"]}})
	}
	for i := 0; i < 120; i++ {
		n := crmNote{ID: strconv.Itoa(11001 + i), CreatedAt: iso(day(i, 120)), Content: pick(p, []string{
			"Call went well; they want a quote for 50 units by Friday.", "Sent pricing deck and case study.",
			"Decision maker is on holiday until the 15th.", "Asked for net-60 payment terms.", "Competitor quoted 10% lower.",
			"Signed NDA received.", "Follow up after their board meeting."})}
		if d := st.deals[p.intn(len(st.deals))]; p.chance(60) {
			n.DealID, n.ContactID = d.ID, d.Associations["contacts"][0]
		} else {
			n.ContactID = st.contacts[p.intn(len(st.contacts))].ID
		}
		st.notes = append([]crmNote{n}, st.notes...)
	}
	return st
}

func (s *Server) routeCRM() {
	h := func(pattern string, f func(*crmState, args, *http.Request) (any, error)) {
		method, path, _ := strings.Cut(pattern, " ")
		handle(s.mux, method+" /crm"+path, s.crm, plainStyle, f)
	}
	for _, kind := range []string{"contacts", "companies", "deals"} {
		h("GET /"+kind, func(st *crmState, a args, _ *http.Request) (any, error) { return st.list(kind, a) })
		h("POST /"+kind, func(st *crmState, a args, _ *http.Request) (any, error) { return st.create(kind, a) })
		h("GET /"+kind+"/{id}", func(st *crmState, _ args, r *http.Request) (any, error) { return st.get(kind, r.PathValue("id")) })
	}
	h("PATCH /contacts/{id}", func(st *crmState, a args, r *http.Request) (any, error) {
		return st.update("contacts", r.PathValue("id"), a)
	})
	h("PATCH /deals/{id}", func(st *crmState, a args, r *http.Request) (any, error) {
		return st.update("deals", r.PathValue("id"), a)
	})
	h("POST /contacts/search", (*crmState).search)
	h("GET /notes", (*crmState).listNotes)
	h("POST /notes", (*crmState).createNote)
	h("GET /pipelines", func(st *crmState, _ args, _ *http.Request) (any, error) {
		return map[string]any{"results": st.pipelines}, nil
	})
}

// crmFields are the properties each object kind accepts, required first.
var crmFields = map[string][]string{
	"contacts":  {"email", "firstname", "lastname", "phone", "company", "jobtitle", "lifecyclestage"},
	"companies": {"name", "domain", "industry", "city", "country", "numberofemployees", "annualrevenue"},
	"deals":     {"dealname", "amount", "pipeline", "dealstage", "closedate", "owner"},
}

var crmSingular = map[string]string{"contacts": "contact", "companies": "company", "deals": "deal"}

type crmPaging struct {
	Next *struct {
		After string `json:"after"`
		Link  string `json:"link"`
	} `json:"next,omitempty"`
}

type crmPage[T any] struct {
	Total   *int       `json:"total,omitempty"`
	Results []T        `json:"results"`
	Paging  *crmPaging `json:"paging,omitempty"`
}

func crmPaginate[T any](st *crmState, kind string, a args, all []T, withTotal bool) (crmPage[T], error) {
	page, next, err := paginate(st.codec, a, "limit", "after", 10, 100, all)
	out := crmPage[T]{Results: page}
	if withTotal {
		n := len(all)
		out.Total = &n
	}
	if next != "" {
		out.Paging = &crmPaging{Next: &struct {
			After string `json:"after"`
			Link  string `json:"link"`
		}{next, "/crm/" + kind + "?after=" + next}}
	}
	return out, err
}

func (st *crmState) objects(kind string) *[]*crmObject {
	switch kind {
	case "contacts":
		return &st.contacts
	case "companies":
		return &st.companies
	}
	return &st.deals
}

func (st *crmState) list(kind string, a args) (any, error) {
	all := *st.objects(kind)
	filters := map[string]string{}
	for _, f := range []string{"lifecyclestage", "pipeline", "dealstage", "industry", "country"} {
		if v := a.str(f); v != "" {
			filters[f] = v
		}
	}
	if len(filters) > 0 {
		all = slices.DeleteFunc(slices.Clone(all), func(o *crmObject) bool {
			for k, v := range filters {
				if !strings.EqualFold(o.Properties[k], v) {
					return true
				}
			}
			return false
		})
	}
	return crmPaginate(st, kind, a, all, false)
}

func (st *crmState) get(kind, id string) (*crmObject, error) {
	for _, o := range *st.objects(kind) {
		if o.ID == id {
			return o, nil
		}
	}
	return nil, errf(http.StatusNotFound, "No %s record with id %q.", crmSingular[kind], id)
}

func (st *crmState) setProps(kind string, o *crmObject, a args) error {
	for _, f := range crmFields[kind] {
		if !a.has(f) {
			continue
		}
		v := a.str(f)
		switch f {
		case "email":
			if !emailRE.MatchString(v) {
				return errf(http.StatusBadRequest, "Property email: %q is not a valid email address.", v)
			}
		case "amount", "numberofemployees", "annualrevenue":
			if _, err := strconv.ParseFloat(v, 64); err != nil {
				return errf(http.StatusBadRequest, "Property %s must be a number (got %q).", f, v)
			}
		case "dealstage":
			pipe := o.Properties["pipeline"]
			if a.has("pipeline") {
				pipe = a.str("pipeline")
			}
			i := slices.IndexFunc(st.pipelines, func(p crmPipeline) bool { return p.ID == pipe })
			if i < 0 || !slices.ContainsFunc(st.pipelines[i].Stages, func(s crmStage) bool { return s.ID == v }) {
				return errf(http.StatusBadRequest, "Deal stage %q does not exist in pipeline %q. List pipelines to see valid stages.", v, pipe)
			}
		case "closedate":
			if _, err := time.Parse(time.DateOnly, v); err != nil {
				return errf(http.StatusBadRequest, "Property closedate must be a date like 2025-09-30 (got %q).", v)
			}
		}
		o.Properties[f] = v
	}
	o.UpdatedAt = iso(st.now())
	return nil
}

func (st *crmState) create(kind string, a args) (any, error) {
	req := crmFields[kind][0]
	if _, err := a.required(req); err != nil {
		return nil, err
	}
	if kind == "contacts" && slices.ContainsFunc(st.contacts, func(o *crmObject) bool { return strings.EqualFold(o.Properties["email"], a.str("email")) }) {
		return nil, errf(http.StatusConflict, "A contact with email %q already exists.", a.str("email"))
	}
	st.seq++
	o := &crmObject{ID: strconv.Itoa(st.seq), Properties: map[string]string{}, CreatedAt: iso(st.now())}
	if kind == "deals" {
		o.Properties["pipeline"], o.Properties["dealstage"] = "sales", "appointmentscheduled"
		o.Associations = map[string][]string{}
		for _, k := range []string{"contacts", "companies"} {
			for _, id := range a.strs(crmSingular[k] + "_ids") {
				if _, err := st.get(k, id); err != nil {
					return nil, err
				}
				o.Associations[k] = append(o.Associations[k], id)
			}
		}
	}
	if err := st.setProps(kind, o, a); err != nil {
		return nil, err
	}
	list := st.objects(kind)
	*list = append(*list, o)
	return o, nil
}

func (st *crmState) update(kind, id string, a args) (any, error) {
	o, err := st.get(kind, id)
	if err != nil {
		return nil, err
	}
	next := &crmObject{Properties: maps.Clone(o.Properties)}
	if err := st.setProps(kind, next, a); err != nil {
		return nil, err
	}
	o.Properties, o.UpdatedAt = next.Properties, next.UpdatedAt
	return o, nil
}

func (st *crmState) search(a args, _ *http.Request) (any, error) {
	q := strings.TrimSpace(a.str("query"))
	stage := a.str("lifecyclestage")
	if q == "" && stage == "" {
		return nil, errf(http.StatusBadRequest, "Give a query (name, email, company or phone fragment) or a lifecyclestage.")
	}
	var hits []*crmObject
	for _, o := range st.contacts {
		p := o.Properties
		if stage != "" && p["lifecyclestage"] != stage {
			continue
		}
		if q == "" || containsFold(p["firstname"]+" "+p["lastname"], q) || containsFold(p["email"], q) ||
			containsFold(p["company"], q) || containsFold(p["phone"], q) {
			hits = append(hits, o)
		}
	}
	if hits == nil {
		hits = []*crmObject{}
	}
	return crmPaginate(st, "contacts/search", a, hits, true)
}

func (st *crmState) listNotes(a args, _ *http.Request) (any, error) {
	contact, deal := a.str("contact_id"), a.str("deal_id")
	all := slices.DeleteFunc(slices.Clone(st.notes), func(n crmNote) bool {
		return (contact != "" && n.ContactID != contact) || (deal != "" && n.DealID != deal)
	})
	return crmPaginate(st, "notes", a, all, false)
}

func (st *crmState) createNote(a args, _ *http.Request) (any, error) {
	content, err := a.required("content")
	if err != nil {
		return nil, err
	}
	n := crmNote{Content: content, ContactID: a.str("contact_id"), DealID: a.str("deal_id"), CreatedAt: iso(st.now())}
	if n.ContactID == "" && n.DealID == "" {
		return nil, errf(http.StatusBadRequest, "Attach the note to a contact_id, a deal_id or both.")
	}
	if n.ContactID != "" {
		if _, err := st.get("contacts", n.ContactID); err != nil {
			return nil, err
		}
	}
	if n.DealID != "" {
		if _, err := st.get("deals", n.DealID); err != nil {
			return nil, err
		}
	}
	st.seq++
	n.ID = strconv.Itoa(st.seq)
	st.notes = slices.Insert(st.notes, 0, n)
	return n, nil
}
