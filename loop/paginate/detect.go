package paginate

import (
	"strings"

	"github.com/trawl-dev/trawl/loop/query"
	"github.com/trawl-dev/trawl/tools"
)

// Detect reads how t paginates from its schema alone: an explicit
// pagination extension wins (x-speakeasy-pagination, x-ms-pageable,
// x-fern-pagination); otherwise the parameter names and types and the
// response schema decide (DESIGN.md §6). Refine completes the plan with
// the first live response.
//
// Parameters are matched case-insensitively and without separators
// (page_size, pageSize, PageSize and page[size] are one name), at the top
// level or one level down in a request body; a property one level down is
// named "<param>.<property>" in the plan. A string page or offset is a
// cursor unless the response counts pages instead of returning a token.
//
// The response is read in one place only: the object that holds the
// primary array. The primary array is reported for every list operation,
// paginated or not, since the size guard cuts views at its items.
//
// A None plan keeps the request-side candidates it saw (a cursor parameter
// whose response declares no continuation, for instance), so that Refine
// can promote it when a live response carries the missing signal.
func Detect(t *tools.Tool) Plan {
	if t == nil {
		return Plan{Strategy: None, Provenance: "none"}
	}
	if p, ok := fromExtensions(t); ok {
		return p
	}
	req := readParams(t)
	ev := evidence{params: req.any(), resource: resourceNames(t.Path)}
	ev.single = ev.resource == nil && strings.HasSuffix(strings.TrimRight(t.Path, "/"), "}")
	var res bodyOffer
	if t.Response != nil {
		res = readResponse(newSchemaShape(t.Response), ev, req.cursorFolds())
	}
	p := decidePlan(req, res, declaresLink(t, req, res))
	switch {
	case t.Response != nil || req.any():
		p.Provenance = "schema"
	default:
		p.Provenance = "none"
	}
	return p
}

// ---- the decision ----

// declaresLink reports that the operation's pages are linked by the Link
// header: its response declares one, or (for importers that do not keep
// response headers) its description says so and the body is a bare array.
func declaresLink(t *tools.Tool, req paramOffer, res bodyOffer) bool {
	for _, h := range t.ResponseHeaders {
		if strings.EqualFold(h, "Link") {
			return true
		}
	}
	return res.itemsFound && res.items == "" && req.any() &&
		strings.Contains(strings.ToLower(t.Description), "link header")
}

// decidePlan turns what the request and the response offer into a plan.
func decidePlan(req paramOffer, res bodyOffer, link bool) Plan {
	p := Plan{
		Strategy:     None,
		SizeParam:    req.size.name,
		PageParam:    req.page.name,
		OffsetParam:  req.offset.name,
		Items:        res.items,
		ItemsFound:   res.itemsFound,
		ItemID:       res.itemID,
		NextToken:    res.token,
		NextURLField: res.nextURL,
		MoreFlag:     res.more,
		MoreInverted: res.moreInverted,
		Total:        res.total,
		TotalPages:   res.totalPages,
	}
	// A string page or offset is a cursor, unless the response counts
	// pages and returns no token (then it is a number sent as a string).
	cursor := req.cursor
	counted := res.token == "" && (res.totalPages != "" || res.total != "")
	if c := req.pageStr; c.name != "" {
		if counted && p.PageParam == "" {
			p.PageParam = c.name
		} else if cursor.name == "" {
			cursor = c
		}
	}
	if c := req.offsetStr; c.name != "" {
		if counted && p.OffsetParam == "" {
			p.OffsetParam = c.name
		} else if cursor.name == "" {
			cursor = c
		}
	}
	p.CursorParam = cursor.name
	token := res.token
	if token == "" && cursor.name != "" && res.nextURL == "" {
		token = res.weakToken
		p.NextToken = token
	}
	in := func(c pagingParam) string { return string(c.in) }
	switch {
	case cursor.name != "" && (token != "" || res.more != ""):
		p.Strategy, p.ParamsIn = Cursor, in(cursor)
		switch {
		case token == "":
			p.CursorFromItem = res.itemID
			if !res.itemsKnown {
				p.CursorFromItem = "id"
			}
			p.Continuation = showPath(res.more)
		case res.more != "" && !res.tokenNext && token == res.token:
			// A position token returned on every page (a sync token):
			// the more flag says whether to follow it.
			p.Continuation = showPath(res.more)
		case token == res.token:
			p.Continuation = res.tokenShow
		default:
			p.Continuation = showPath(token)
		}
	case link:
		p.Strategy, p.Continuation = LinkHeader, "Link header"
	case res.nextURL != "" && req.offset.name != "" && cursor.name == "":
		// An integer offset reproduces the walk by itself; the next URL
		// says when it ends.
		p.Strategy, p.Continuation = Offset, res.urlShow
	case res.nextURL != "":
		p.Strategy, p.Continuation = NextURL, res.urlShow
	case p.PageParam != "":
		p.Strategy = PageNumber
		p.Continuation = showPath(firstNonEmpty(res.more, res.totalPages, res.total))
	case p.OffsetParam != "":
		p.Strategy = Offset
		p.Continuation = showPath(firstNonEmpty(res.more, res.total))
	}
	switch p.Strategy {
	case None:
		p.ParamsIn = in(firstParam(cursor, req.page, req.offset))
	case LinkHeader, NextURL:
		p.ParamsIn = in(firstParam(req.page, cursor, req.offset, req.size))
	case PageNumber:
		p.ParamsIn = in(firstParam(req.page, req.pageStr, req.size))
	case Offset:
		p.ParamsIn = in(firstParam(req.offset, req.offsetStr, req.size))
	}
	return p
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func firstParam(ps ...pagingParam) pagingParam {
	for _, p := range ps {
		if p.name != "" {
			return p
		}
	}
	return pagingParam{}
}

// showPath renders a field path for people: keys joined by dots.
func showPath(path string) string {
	if path == "" {
		return ""
	}
	keys, err := query.SplitPath(path)
	if err != nil {
		return path
	}
	return strings.Join(keys, ".")
}
