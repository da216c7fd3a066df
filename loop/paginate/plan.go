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
}

// Paginated reports whether the plan walks more than one page.
func (p Plan) Paginated() bool { return p.Strategy != "" && p.Strategy != None }
