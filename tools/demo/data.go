package demo

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// Sizes of the Acme collections. Tests that walk an endpoint compare what
// they collected against these.
const (
	OrderCount    = 2400
	CustomerCount = 1337
	TicketCount   = 900
	EventCount    = 650
	PropertyCount = 40
)

// BookingCount returns how many bookings the property with the given id
// has (0 for an unknown id). Counts vary: some properties have none, some
// more than a hundred.
func BookingCount(propertyID string) int {
	return len(acmeData().bookings[propertyID])
}

type address struct {
	Line1      string `json:"line1"`
	City       string `json:"city"`
	PostalCode string `json:"postal_code"`
	Country    string `json:"country"`
}

type orderCustomer struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Email string `json:"email"`
}

type lineItem struct {
	SKU       string  `json:"sku"`
	Name      string  `json:"name"`
	Quantity  int     `json:"quantity"`
	UnitPrice float64 `json:"unit_price"`
	Amount    float64 `json:"amount"`
}

type order struct {
	ID              string        `json:"id"`
	Number          string        `json:"number"`
	Status          string        `json:"status"`
	Total           float64       `json:"total"`
	Currency        string        `json:"currency"`
	Customer        orderCustomer `json:"customer"`
	LineItems       []lineItem    `json:"line_items"`
	ShippingAddress address       `json:"shipping_address"`
	CreatedAt       string        `json:"created_at"`
	UpdatedAt       string        `json:"updated_at"`
}

type customer struct {
	ID          string  `json:"id"`
	Name        string  `json:"name"`
	Email       string  `json:"email"`
	Company     string  `json:"company"`
	Phone       string  `json:"phone"`
	City        string  `json:"city"`
	Country     string  `json:"country"`
	Tier        string  `json:"tier"`
	OrdersCount int     `json:"orders_count"`
	TotalSpent  float64 `json:"total_spent"`
	Currency    string  `json:"currency"`
	CreatedAt   string  `json:"created_at"`
}

type ticket struct {
	ID         string   `json:"id"`
	Subject    string   `json:"subject"`
	Status     string   `json:"status"`
	Priority   string   `json:"priority"`
	Channel    string   `json:"channel"`
	CustomerID string   `json:"customer_id"`
	OrderID    *string  `json:"order_id"`
	Assignee   *string  `json:"assignee"`
	Tags       []string `json:"tags"`
	CreatedAt  string   `json:"created_at"`
	UpdatedAt  string   `json:"updated_at"`
}

type eventResource struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

type event struct {
	ID         string        `json:"id"`
	Type       string        `json:"type"`
	OccurredAt string        `json:"occurred_at"`
	Actor      string        `json:"actor"`
	Resource   eventResource `json:"resource"`
	Summary    string        `json:"summary"`
}

type property struct {
	ID         string  `json:"id"`
	Name       string  `json:"name"`
	Type       string  `json:"type"`
	City       string  `json:"city"`
	Country    string  `json:"country"`
	Rooms      int     `json:"rooms"`
	Rating     float64 `json:"rating"`
	NightlyFee float64 `json:"nightly_rate"`
	Currency   string  `json:"currency"`
	Active     bool    `json:"active"`
}

type booking struct {
	ID         string  `json:"id"`
	PropertyID string  `json:"property_id"`
	GuestName  string  `json:"guest_name"`
	GuestEmail string  `json:"guest_email"`
	CheckIn    string  `json:"check_in"`
	CheckOut   string  `json:"check_out"`
	Nights     int     `json:"nights"`
	Guests     int     `json:"guests"`
	Amount     float64 `json:"amount"`
	Currency   string  `json:"currency"`
	Status     string  `json:"status"`
	Channel    string  `json:"channel"`
	CreatedAt  string  `json:"created_at"`
}

// dataset is the generated Acme data. It is built once per process and
// never mutated: handlers copy before they change anything.
type dataset struct {
	orders      []order // oldest first
	orderByID   map[string]*order
	customers   []customer // newest first, as GET /customers lists them
	customerIdx map[string]int
	tickets     []ticket // oldest first
	events      []event  // newest first
	properties  []property
	bookings    map[string][]booking // by property id, check-in ascending
	asOf        time.Time
}

var acmeData = sync.OnceValue(generate)

// dataEnd is the instant the generated history ends at.
var dataEnd = time.Date(2025, 6, 30, 18, 0, 0, 0, time.UTC)

const isoSecond = "2006-01-02T15:04:05Z"

func iso(t time.Time) string { return t.UTC().Format(isoSecond) }

func round2(x float64) float64 { return math.Round(x*100) / 100 }

func currencyFor(country string) string {
	switch country {
	case "GB":
		return "GBP"
	case "US", "CA", "MX", "BR", "JP", "SG", "AU", "ZA":
		return "USD"
	}
	return "EUR"
}

type product struct {
	SKU   string
	Name  string
	Price float64
}

var catalog = []product{
	{"ACM-1001", "Anvil, forged steel (50 kg)", 349}, {"ACM-1002", "Rocket skates", 189.5},
	{"ACM-1003", "Giant rubber band", 12.99}, {"ACM-1004", "Portable hole", 79},
	{"ACM-1005", "Earthquake pills (bottle of 30)", 24.95}, {"ACM-1006", "Jet-propelled unicycle", 620},
	{"ACM-1007", "Bird seed, premium (10 kg)", 18.4}, {"ACM-1008", "Spring-loaded boxing glove", 45},
	{"ACM-1009", "Tornado seeds", 9.99}, {"ACM-1010", "Instant girl scout kit", 32},
	{"ACM-2001", "Industrial magnet", 129}, {"ACM-2002", "Glue, super strength (1 l)", 21.5},
	{"ACM-2003", "Dehydrated boulders (pack of 5)", 14.25}, {"ACM-2004", "Bat-man's outfit", 88},
	{"ACM-2005", "Invisible paint", 56.7}, {"ACM-2006", "Iron carrot", 7.5},
	{"ACM-2007", "Catapult, garden size", 410}, {"ACM-2008", "Do-it-yourself tornado kit", 65},
	{"ACM-3001", "Road runner lure", 3.99}, {"ACM-3002", "Outboard motor for roller skates", 275},
	{"ACM-3003", "Triple-strength fortified leg muscle vitamins", 19.99}, {"ACM-3004", "Lightning bolts (12)", 99},
	{"ACM-3005", "Hi-speed tonic", 11.25}, {"ACM-3006", "Aspirin, extra large", 6.5},
}

var supportAgents = []string{"maria@acme.example", "dev@acme.example", "kofi@acme.example", "lena@acme.example", "sam@acme.example"}

func generate() *dataset {
	d := &dataset{
		orderByID:   map[string]*order{},
		customerIdx: map[string]int{},
		bookings:    map[string][]booking{},
		asOf:        dataEnd,
	}
	d.customers = genCustomers(newPRNG(0xC057), CustomerCount, 1)
	for i := range d.customers {
		d.customerIdx[d.customers[i].ID] = i
	}
	d.genOrders(newPRNG(0x0D3E5))
	d.genTickets(newPRNG(0x71C4E7))
	d.genProperties(newPRNG(0x9209))
	d.genEvents(newPRNG(0xE7E47))
	return d
}

// genCustomers makes n customers numbered from first, newest first.
func genCustomers(p *prng, n, first int) []customer {
	start := time.Date(2022, 3, 1, 9, 0, 0, 0, time.UTC)
	span := dataEnd.Sub(start)
	out := make([]customer, n)
	for i := 0; i < n; i++ {
		num := first + i
		fn, ln := pick(p, firstNames), pick(p, lastNames)
		co := pick(p, companies)
		pl := pick(p, places)
		created := start.Add(time.Duration(float64(span) * float64(num-1) / float64(CustomerCount+50)))
		created = created.Add(time.Duration(p.intn(3600)) * time.Second)
		out[n-1-i] = customer{
			ID:        fmt.Sprintf("cus_%04d", num),
			Name:      fn + " " + ln,
			Email:     fmt.Sprintf("%s%d@%s", emailLocal(fn, ln), num%97, domainOf(co)),
			Company:   co,
			Phone:     fmt.Sprintf("+%d %03d %04d", 1+p.intn(60), p.intn(1000), p.intn(10000)),
			City:      pl.City,
			Country:   pl.Country,
			Tier:      weighted(p, []string{"standard", "plus", "enterprise"}, []int{70, 22, 8}),
			Currency:  currencyFor(pl.Country),
			CreatedAt: iso(created),
		}
	}
	return out
}

func (d *dataset) genOrders(p *prng) {
	start := time.Date(2024, 1, 2, 8, 0, 0, 0, time.UTC)
	step := dataEnd.Sub(start) / OrderCount
	d.orders = make([]order, OrderCount)
	for i := range d.orders {
		// A few customers order a lot: a quarter of orders go to the first 40.
		var c *customer
		if p.chance(25) {
			c = &d.customers[len(d.customers)-1-p.intn(40)]
		} else {
			c = &d.customers[p.intn(len(d.customers))]
		}
		created := start.Add(step*time.Duration(i) + time.Duration(p.intn(int(step/time.Second)))*time.Second)
		items := make([]lineItem, p.between(1, 4))
		var total float64
		for j := range items {
			pr := pick(p, catalog)
			q := weighted(p, []int{1, 2, 3, 5, 10}, []int{55, 20, 12, 8, 5})
			items[j] = lineItem{SKU: pr.SKU, Name: pr.Name, Quantity: q, UnitPrice: pr.Price, Amount: round2(pr.Price * float64(q))}
			total += items[j].Amount
		}
		status := weighted(p, []string{"open", "paid", "refunded", "cancelled"}, []int{14, 66, 8, 12})
		if created.After(dataEnd.AddDate(0, 0, -10)) && p.chance(60) {
			status = "open"
		}
		updated := created.Add(time.Duration(p.between(1, 72*60)) * time.Minute)
		o := order{
			ID:        fmt.Sprintf("ord_%04d", i+1),
			Number:    fmt.Sprintf("A-%05d", 10000+i+1),
			Status:    status,
			Total:     round2(total),
			Currency:  c.Currency,
			Customer:  orderCustomer{ID: c.ID, Name: c.Name, Email: c.Email},
			LineItems: items,
			ShippingAddress: address{
				Line1:      fmt.Sprintf("%d %s", p.between(1, 240), pick(p, []string{"Market Street", "Rua Augusta", "Hauptstraße", "Rue de Rivoli", "Calle Mayor", "High Street", "Main Street", "Kingsway"})),
				City:       c.City,
				PostalCode: fmt.Sprintf("%05d", p.intn(100000)),
				Country:    c.Country,
			},
			CreatedAt: iso(created),
			UpdatedAt: iso(updated),
		}
		d.orders[i] = o
		if status == "paid" {
			c.TotalSpent = round2(c.TotalSpent + o.Total)
		}
		c.OrdersCount++
	}
	for i := range d.orders {
		d.orderByID[d.orders[i].ID] = &d.orders[i]
	}
}

var ticketSubjects = []string{
	"Refund not received for order %s", "Package for %s arrived damaged", "Change the delivery address on %s",
	"Cancel order %s, ordered by mistake", "Tracking link for %s is not working", "Wrong item shipped in %s",
	"Cannot log in to the customer portal", "Invoice shows the wrong VAT number", "Question about bulk pricing for anvils",
	"Duplicate charge on my card", "Need a copy of last month's invoices", "How do I add a second user to our account?",
	"Rocket skates: left skate fires early", "Request to close our account", "Discount code rejected at checkout",
}

func (d *dataset) genTickets(p *prng) {
	start := time.Date(2024, 9, 1, 7, 0, 0, 0, time.UTC)
	step := dataEnd.Sub(start) / TicketCount
	d.tickets = make([]ticket, TicketCount)
	tagSets := [][]string{{"billing"}, {"shipping"}, {"shipping", "damaged"}, {"account"}, {"refund", "billing"}, {"product"}, {}, {"vip"}}
	for i := range d.tickets {
		subject := pick(p, ticketSubjects)
		var orderID *string
		custID := d.customers[p.intn(len(d.customers))].ID
		if containsVerb(subject) {
			o := d.orders[p.intn(len(d.orders))]
			id := o.ID
			orderID, custID = &id, o.Customer.ID
			subject = fmt.Sprintf(subject, o.ID)
		}
		created := start.Add(step*time.Duration(i) + time.Duration(p.intn(int(step/time.Second)))*time.Second)
		status := weighted(p, []string{"open", "pending", "solved", "closed"}, []int{18, 12, 40, 30})
		var assignee *string
		if status != "open" || p.chance(50) {
			a := pick(p, supportAgents)
			assignee = &a
		}
		tags := append([]string{}, pick(p, tagSets)...)
		d.tickets[i] = ticket{
			ID:         fmt.Sprintf("tkt_%04d", i+1),
			Subject:    subject,
			Status:     status,
			Priority:   weighted(p, []string{"low", "normal", "high", "urgent"}, []int{25, 50, 18, 7}),
			Channel:    pick(p, []string{"email", "chat", "phone", "web"}),
			CustomerID: custID,
			OrderID:    orderID,
			Assignee:   assignee,
			Tags:       tags,
			CreatedAt:  iso(created),
			UpdatedAt:  iso(created.Add(time.Duration(p.between(5, 5000)) * time.Minute)),
		}
	}
}

func containsVerb(s string) bool {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '%' && s[i+1] == 's' {
			return true
		}
	}
	return false
}

var propertyNames = []string{
	"Harbor View Suites", "Old Town Lofts", "Riverside Apartments", "The Cork Tree Inn", "Alfama Terrace",
	"Canal House", "Pinewood Cabins", "Sunset Villas", "Market Square Rooms", "The Lighthouse",
	"Garden Court", "Hilltop Retreat", "Station Hostel", "Bay Bridge Studios", "Olive Grove Villa",
	"Cathedral Quarter Flats", "Seaside Bungalows", "The Granary", "Lakeside Lodge", "Quayside Residences",
	"Vineyard Guesthouse", "The Mews", "North Point Hotel", "Courtyard Studios", "Palm Beach House",
	"Castle Hill Apartments", "Tramline Lofts", "The Boathouse", "Citrus Garden Suites", "Meadow Farm Stay",
	"Skyline Penthouse", "The Old Bakery", "Harbour Lights B&B", "Cliffside Cottages", "Museum District Rooms",
	"Library Lane Flats", "The Foundry Hotel", "Orchard House", "Promenade Suites", "Twin Peaks Chalets",
}

func (d *dataset) genProperties(p *prng) {
	d.properties = make([]property, PropertyCount)
	seq := 0
	for i := range d.properties {
		n := i + 1
		pl := pick(p, places)
		typ := weighted(p, []string{"hotel", "apartment", "villa", "hostel", "guesthouse"}, []int{30, 35, 12, 8, 15})
		rate := float64(p.between(55, 420))
		d.properties[i] = property{
			ID: fmt.Sprintf("p_%d", n), Name: propertyNames[i], Type: typ, City: pl.City, Country: pl.Country,
			Rooms: p.between(2, 140), Rating: float64(p.between(35, 49)) / 10, NightlyFee: rate,
			Currency: currencyFor(pl.Country), Active: n != 17,
		}
		var count int
		switch {
		case n%9 == 4:
			count = 0
		case n%6 == 2:
			count = p.between(101, 260)
		default:
			count = p.between(1, 90)
		}
		start := time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)
		list := make([]booking, count)
		day := 0
		for j := range list {
			day += p.intn(4)
			in := start.AddDate(0, 0, day)
			nights := weighted(p, []int{1, 2, 3, 4, 7, 14}, []int{20, 30, 22, 12, 12, 4})
			fn, ln := pick(p, firstNames), pick(p, lastNames)
			seq++
			list[j] = booking{
				ID: fmt.Sprintf("bkg_%05d", seq), PropertyID: d.properties[i].ID,
				GuestName: fn + " " + ln, GuestEmail: emailLocal(fn, ln) + "@guest.example",
				CheckIn: in.Format(time.DateOnly), CheckOut: in.AddDate(0, 0, nights).Format(time.DateOnly),
				Nights: nights, Guests: p.between(1, 4), Amount: round2(rate * float64(nights)),
				Currency: d.properties[i].Currency,
				Status:   weighted(p, []string{"confirmed", "checked_out", "cancelled"}, []int{35, 52, 13}),
				Channel:  weighted(p, []string{"direct", "partner", "phone"}, []int{55, 38, 7}),
				CreatedAt: iso(in.AddDate(0, 0, -p.between(2, 90)).Add(
					time.Duration(p.intn(86400)) * time.Second)),
			}
		}
		d.bookings[d.properties[i].ID] = list
	}
}

func (d *dataset) genEvents(p *prng) {
	start := time.Date(2025, 5, 1, 0, 0, 0, 0, time.UTC)
	step := dataEnd.Sub(start) / EventCount
	d.events = make([]event, EventCount)
	actors := append([]string{"system", "system", "api"}, supportAgents...)
	for i := 0; i < EventCount; i++ {
		typ := weighted(p, []string{"order.created", "order.paid", "order.refunded", "customer.created",
			"ticket.created", "ticket.solved", "booking.confirmed", "booking.cancelled"}, []int{24, 20, 4, 10, 14, 10, 12, 6})
		var res eventResource
		var summary string
		switch typ[:4] {
		case "orde":
			o := d.orders[len(d.orders)-1-p.intn(400)]
			res = eventResource{"order", o.ID}
			summary = fmt.Sprintf("Order %s (%s %.2f) %s", o.Number, o.Currency, o.Total, typ[6:])
		case "cust":
			c := d.customers[p.intn(120)]
			res = eventResource{"customer", c.ID}
			summary = fmt.Sprintf("%s signed up (%s)", c.Name, c.Company)
		case "tick":
			t := d.tickets[len(d.tickets)-1-p.intn(150)]
			res = eventResource{"ticket", t.ID}
			summary = fmt.Sprintf("Ticket %q %s", t.Subject, typ[7:])
		default:
			pr := d.properties[p.intn(len(d.properties))]
			res = eventResource{"booking", fmt.Sprintf("bkg_%05d", 1+p.intn(3000))}
			summary = fmt.Sprintf("Booking at %s %s", pr.Name, typ[8:])
		}
		at := start.Add(step*time.Duration(i) + time.Duration(p.intn(int(step/time.Second)))*time.Second)
		d.events[EventCount-1-i] = event{
			ID: fmt.Sprintf("evt_%04d", i+1), Type: typ, OccurredAt: iso(at),
			Actor: pick(p, actors), Resource: res, Summary: summary,
		}
	}
}
