package demo

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
)

func (s *Server) routeAcme() {
	s.mux.HandleFunc("GET /orders", s.listOrders)
	s.mux.HandleFunc("GET /orders/{order_id}", s.getOrder)
	s.mux.HandleFunc("GET /customers", s.listCustomers)
	s.mux.HandleFunc("GET /customers/{customer_id}", s.getCustomer)
	s.mux.HandleFunc("GET /tickets", s.listTickets)
	s.mux.HandleFunc("GET /events", s.listEvents)
	s.mux.HandleFunc("GET /properties", s.listProperties)
	s.mux.HandleFunc("GET /properties/{property_id}/bookings", s.listBookings)
	s.mux.HandleFunc("GET /stats", s.getStats)
}

// paramError is a 400 for a query parameter the client got wrong.
type paramError struct{ name, msg string }

func (e *paramError) Error() string { return e.name + " " + e.msg }

// intParam parses an integer query parameter that must be at least lo;
// absent (or empty) yields def.
func intParam(q url.Values, name string, def, lo int) (int, error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo {
		return 0, &paramError{name, fmt.Sprintf("must be an integer greater than or equal to %d (got %q)", lo, v)}
	}
	return n, nil
}

// enumParam checks an optional query parameter against its allowed values.
func enumParam(q url.Values, name string, allowed ...string) (string, error) {
	v := q.Get(name)
	if v == "" || slices.Contains(allowed, v) {
		return v, nil
	}
	return "", &paramError{name, fmt.Sprintf("must be one of %v (got %q)", allowed, v)}
}

func badRequest(w http.ResponseWriter, err error) {
	writeError(w, http.StatusBadRequest, "invalid_parameter", err.Error()+".")
}

func notFound(w http.ResponseWriter, kind, id string) {
	writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("No %s with id %q.", kind, id))
}

// pageParams reads page and per_page for a page-numbered list.
func (s *Server) pageParams(q url.Values, def, maxSize int) (page, size int, err error) {
	if page, err = intParam(q, "page", 1, 1); err != nil {
		return 0, 0, err
	}
	asked, err := intParam(q, "per_page", 0, 1)
	if err != nil {
		return 0, 0, err
	}
	return page, s.opt.Faults.pageSize(asked, def, maxSize), nil
}

func filter[T any](all []T, keep func(*T) bool) []T {
	var out []T
	for i := range all {
		if keep(&all[i]) {
			out = append(out, all[i])
		}
	}
	return out
}

type ordersPage struct {
	Data  []order `json:"data"`
	Total int     `json:"total"`
}

func (s *Server) listOrders(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	page, size, err := s.pageParams(q, 25, 100)
	if err != nil {
		badRequest(w, err)
		return
	}
	status, err := enumParam(q, "status", "open", "paid", "refunded", "cancelled")
	if err != nil {
		badRequest(w, err)
		return
	}
	all := s.data.orders
	if cust := q.Get("customer_id"); status != "" || cust != "" {
		all = filter(all, func(o *order) bool {
			return (status == "" || o.Status == status) && (cust == "" || o.Customer.ID == cust)
		})
	}
	items := pageOf(&s.opt.Faults, all, (page-1)*size, size)
	writeJSON(w, http.StatusOK, ordersPage{Data: items, Total: len(all) + s.opt.Faults.WrongTotal})
}

func (s *Server) getOrder(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("order_id")
	o, ok := s.data.orderByID[id]
	if !ok {
		notFound(w, "order", id)
		return
	}
	writeJSON(w, http.StatusOK, o)
}

type customersPage struct {
	Items   []customer `json:"items"`
	HasMore bool       `json:"has_more"`
}

// customers returns the customer list as a request at this moment sees it,
// counting the request for the list faults.
func (s *Server) customers() (all []customer, empty bool) {
	f := &s.opt.Faults
	s.mu.Lock()
	defer s.mu.Unlock()
	if ins := f.InsertDuringWalk; ins.Count > 0 && s.walk.inserted == nil && s.walk.customerLists >= ins.AfterRequests {
		s.walk.inserted = genCustomers(newPRNG(0x1A5E27), ins.Count, CustomerCount+1)
	}
	s.walk.customerLists++
	if ep := f.EmptyPagesWithMore; ep.Forever || s.walk.emptyServed < ep.Count {
		s.walk.emptyServed++
		return nil, true
	}
	if len(s.walk.inserted) == 0 {
		return s.data.customers, false
	}
	return slices.Concat(s.walk.inserted, s.data.customers), false
}

func (s *Server) listCustomers(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	offset, err := intParam(q, "offset", 0, 0)
	if err != nil {
		badRequest(w, err)
		return
	}
	limit, err := intParam(q, "limit", 0, 1)
	if err != nil {
		badRequest(w, err)
		return
	}
	tier, err := enumParam(q, "tier", "standard", "plus", "enterprise")
	if err != nil {
		badRequest(w, err)
		return
	}
	all, empty := s.customers()
	if empty {
		writeJSON(w, http.StatusOK, customersPage{Items: []customer{}, HasMore: true})
		return
	}
	if country := q.Get("country"); tier != "" || country != "" {
		all = filter(all, func(c *customer) bool {
			return (tier == "" || c.Tier == tier) && (country == "" || c.Country == country)
		})
	}
	size := s.opt.Faults.pageSize(limit, 50, 200)
	items := pageOf(&s.opt.Faults, all, offset, size)
	writeJSON(w, http.StatusOK, customersPage{Items: items, HasMore: offset+len(items) < len(all)})
}

func (s *Server) getCustomer(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("customer_id")
	if i, ok := s.data.customerIdx[id]; ok {
		writeJSON(w, http.StatusOK, s.data.customers[i])
		return
	}
	s.mu.Lock()
	i := slices.IndexFunc(s.walk.inserted, func(c customer) bool { return c.ID == id })
	var c customer
	if i >= 0 {
		c = s.walk.inserted[i]
	}
	s.mu.Unlock()
	if i < 0 {
		notFound(w, "customer", id)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

type propertiesList struct {
	Properties []property `json:"properties"`
}

func (s *Server) listProperties(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	typ, err := enumParam(q, "type", "hotel", "apartment", "villa", "hostel", "guesthouse")
	if err != nil {
		badRequest(w, err)
		return
	}
	country := q.Get("country")
	all := filter(s.data.properties, func(p *property) bool {
		return (typ == "" || p.Type == typ) && (country == "" || p.Country == country)
	})
	if all == nil {
		all = []property{}
	}
	writeJSON(w, http.StatusOK, propertiesList{Properties: all})
}

type bookingsPage struct {
	Data  []booking `json:"data"`
	Total int       `json:"total"`
}

func (s *Server) listBookings(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("property_id")
	all, ok := s.data.bookings[id]
	if !ok {
		notFound(w, "property", id)
		return
	}
	q := r.URL.Query()
	page, size, err := s.pageParams(q, 25, 100)
	if err != nil {
		badRequest(w, err)
		return
	}
	status, err := enumParam(q, "status", "confirmed", "checked_out", "cancelled")
	if err != nil {
		badRequest(w, err)
		return
	}
	if status != "" {
		all = filter(all, func(b *booking) bool { return b.Status == status })
	}
	writeJSON(w, http.StatusOK, bookingsPage{Data: pageOf(&s.opt.Faults, all, (page-1)*size, size), Total: len(all)})
}

type stats struct {
	AsOf   string `json:"as_of"`
	Orders struct {
		Total    int                `json:"total"`
		ByStatus map[string]int     `json:"by_status"`
		Revenue  map[string]float64 `json:"paid_revenue_by_currency"`
	} `json:"orders"`
	Customers struct {
		Total  int            `json:"total"`
		ByTier map[string]int `json:"by_tier"`
	} `json:"customers"`
	Tickets struct {
		Total    int            `json:"total"`
		ByStatus map[string]int `json:"by_status"`
	} `json:"tickets"`
	Events     int `json:"events"`
	Properties struct {
		Total  int `json:"total"`
		Active int `json:"active"`
	} `json:"properties"`
	Bookings struct {
		Total    int            `json:"total"`
		ByStatus map[string]int `json:"by_status"`
	} `json:"bookings"`
}

func (s *Server) getStats(w http.ResponseWriter, r *http.Request) {
	d := s.data
	var st stats
	st.AsOf = iso(d.asOf)
	st.Orders.Total = len(d.orders)
	st.Orders.ByStatus = map[string]int{}
	st.Orders.Revenue = map[string]float64{}
	for _, o := range d.orders {
		st.Orders.ByStatus[o.Status]++
		if o.Status == "paid" {
			st.Orders.Revenue[o.Currency] = round2(st.Orders.Revenue[o.Currency] + o.Total)
		}
	}
	st.Customers.Total = len(d.customers)
	st.Customers.ByTier = map[string]int{}
	for _, c := range d.customers {
		st.Customers.ByTier[c.Tier]++
	}
	st.Tickets.Total = len(d.tickets)
	st.Tickets.ByStatus = map[string]int{}
	for _, t := range d.tickets {
		st.Tickets.ByStatus[t.Status]++
	}
	st.Events = len(d.events)
	st.Properties.Total = len(d.properties)
	st.Bookings.ByStatus = map[string]int{}
	for _, p := range d.properties {
		if p.Active {
			st.Properties.Active++
		}
		for _, b := range d.bookings[p.ID] {
			st.Bookings.Total++
			st.Bookings.ByStatus[b.Status]++
		}
	}
	writeJSON(w, http.StatusOK, st)
}
