// Package paginate detects how an operation paginates — from its schema,
// refined by its first live response — and walks every page of it under
// bounded budgets, with the stop rules and guards of trawl's design
// (DESIGN.md §6): the server's own continuation signal wins, cursors and
// next URLs are remembered so a cycle can never pass for completion, and
// a walk that hits a budget says so.
package paginate

// Strategy is how an operation's pages are reached.
type Strategy string

const (
	None       Strategy = "none"        // not paginated
	PageNumber Strategy = "page"        // an integer page number
	Offset     Strategy = "offset"      // an integer offset, advanced by items received
	Cursor     Strategy = "cursor"      // an opaque token sent back in a parameter
	NextURL    Strategy = "next_url"    // a URL in the response body names the next page
	LinkHeader Strategy = "link_header" // RFC 8288 Link header with rel="next"
)

// Plan is what detection found for one operation. Paths are dot-separated
// JSON paths into the response body ("data", "response_metadata.next_cursor");
// an empty Items path with ItemsFound means the body is a bare array.
type Plan struct {
	Strategy Strategy `json:"strategy"`

	// Request side: the parameter names (as the tool's Params name them).
	SizeParam   string `json:"sizeParam,omitempty"`
	PageParam   string `json:"pageParam,omitempty"`
	OffsetParam string `json:"offsetParam,omitempty"`
	CursorParam string `json:"cursorParam,omitempty"`
	ParamsIn    string `json:"paramsIn,omitempty"` // "query", "body", "header"

	// Response side.
	Items      string `json:"items"`      // path of the primary array; "" = bare array (if ItemsFound)
	ItemsFound bool   `json:"itemsFound"` // false: no primary array known yet
	// Continuation names the signal the walk trusts, in the words of
	// `trawl inspect`: "has_more", "next_cursor", "Link header",
	// "next_page_uri", "total", …  Usually the last path element of one
	// of the fields below.
	Continuation string `json:"continuation,omitempty"`

	NextToken    string `json:"nextToken,omitempty"`    // path of the next cursor/token
	NextURLField string `json:"nextURLField,omitempty"` // path of the next-page URL
	MoreFlag     string `json:"moreFlag,omitempty"`     // path of has_more-like boolean
	MoreInverted bool   `json:"moreInverted,omitempty"` // MoreFlag means "this is the last page" (isLast)
	Total        string `json:"total,omitempty"`        // path of a total item count
	TotalPages   string `json:"totalPages,omitempty"`   // path of a total page count
	// CursorFromItem is the item field sent as the cursor when the
	// response carries no token, only a more flag (Stripe's starting_after
	// takes the last item's "id").
	CursorFromItem string `json:"cursorFromItem,omitempty"`
	// ItemID is the field used to count duplicate items ("id" by default).
	ItemID string `json:"itemId,omitempty"`

	// Provenance says where the plan came from: "extension:<name>",
	// "schema", "schema+response", "response" or "none".
	Provenance string `json:"provenance"`

	// Confidence is how sure detection is (high, medium, low) and
	// Evidence what it rests on, in words for `trawl inspect`. A walk on a
	// low-confidence plan never claims completeness without the server's
	// own end signal (EndConfirmed).
	Confidence Confidence `json:"confidence,omitempty"`
	Evidence   []string   `json:"evidence,omitempty"`
	// Stream marks an event or change stream (a position handed back on
	// every page, next_stream_position): it never ends by itself, so a walk
	// stops only at a budget or an explicit stop, and says so.
	Stream bool `json:"stream,omitempty"`
	// Snapshot marks an offset or page-number walk whose API documents
	// that its pages are read from one snapshot of the collection (the
	// x-trawl-snapshot extension, or the operation's or its paging
	// parameter's description: "snapshot", "point in time", "consistent
	// across pages"): rows cannot shift between pages, so the walk is
	// trusted without overlapping pages or probes. A stable sort order
	// alone does not count: a row added or removed before the position
	// read next still shifts every row after it.
	Snapshot bool `json:"snapshot,omitempty"`
}

// Confidence grades a detection.
type Confidence string

const (
	High   Confidence = "high"   // declared: an extension, or parameters and a continuation that match
	Medium Confidence = "medium" // a convention with corroboration (a keyset over item ids, a Link header named in prose)
	Low    Confidence = "low"    // a guess: the continuation is not in the document at all
)

// Unsure reports a plan detection is not sure of: low confidence, or a
// stream, whose pages never say "done".
func (p Plan) Unsure() bool { return p.Confidence == Low || p.Stream }

// EndConfirmed is the check a walk consults before it reports a plan
// detection was unsure of as complete: the last page must carry the
// server's own end signal — a more flag saying done, a continuation field
// the plan names present but empty, or a Link header without rel="next".
// Absence alone (no token field, no Link header at all) proves nothing
// when the plan only guessed where the continuation is. Sure plans are
// always confirmed.
func (p Plan) EndConfirmed(s signals) bool {
	if !p.Unsure() {
		return true
	}
	if p.Stream {
		return s.flag == moreNo
	}
	return s.flag == moreNo || s.link.present || s.tokenSeen || s.urlSeen
}

// unconfirmedEnd words why a walk on an unsure plan stops without
// claiming completeness.
func unconfirmedEnd(p Plan) string {
	if p.Stream {
		return "an event stream never ends by itself: the walk stopped at the last page fetched, and more may follow"
	}
	return "the pagination was guessed (low confidence) and the last page carried no end signal of the server's own, so the walk cannot vouch that it is complete"
}

func (p *Plan) because(c Confidence, evidence ...string) {
	p.Confidence = c
	p.Evidence = append(p.Evidence, evidence...)
}

// Paginated reports whether the plan walks more than one page.
func (p Plan) Paginated() bool { return p.Strategy != "" && p.Strategy != None }
