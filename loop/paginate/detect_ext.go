package paginate

import (
	"slices"
	"strings"

	"github.com/trawl-dev/trawl/loop/query"
	"github.com/trawl-dev/trawl/tools"
)

// ---- explicit extensions ----

// extensionNames are the pagination extensions Detect honours, in the
// order it looks for them.
var extensionNames = []string{"x-speakeasy-pagination", "x-ms-pageable", "x-fern-pagination", "x-pagination"}

// fromExtensions builds the plan an explicit pagination extension
// describes. What the extension leaves unsaid (the items of an
// x-ms-pageable operation with no itemName, a more flag) comes from the
// schema.
func fromExtensions(t *tools.Tool) (Plan, bool) {
	for _, name := range extensionNames {
		var v any
		found := false
		for k, x := range t.Extensions {
			if strings.EqualFold(k, name) {
				v, found = x, true
				break
			}
		}
		if !found {
			continue
		}
		req := readParams(t)
		var res bodyOffer
		if t.Response != nil {
			ev := evidence{params: true, resource: resourceNames(t.Path)}
			res = readResponse(newSchemaShape(t.Response), ev, req.cursorFolds())
		}
		var p Plan
		var ok bool
		switch name {
		case "x-speakeasy-pagination":
			p, ok = speakeasyPlan(t, v, req)
		case "x-ms-pageable":
			p, ok = msPageablePlan(v, req)
		case "x-fern-pagination":
			p, ok = fernPlan(t, v, req)
		case "x-pagination":
			p, ok = xPaginationPlan(t, v, req)
		}
		if !ok {
			continue
		}
		if !p.ItemsFound && res.itemsFound {
			p.Items, p.ItemsFound = res.items, true
		}
		if p.ItemsFound && p.Items == res.items {
			p.ItemID = res.itemID
		}
		if p.MoreFlag == "" && p.NextToken == "" && p.NextURLField == "" {
			p.MoreFlag, p.MoreInverted = res.more, res.moreInverted
		}
		if p.Total == "" {
			p.Total = res.total
		}
		if p.Continuation == "" {
			switch p.Strategy {
			case Cursor:
				p.Continuation = showPath(p.MoreFlag)
			case PageNumber, Offset:
				// What the schema offers to end the walk, in the words
				// inspect uses.
				p.Continuation = firstNonEmpty(showPath(p.MoreFlag), showPath(res.token), res.urlShow,
					showPath(res.totalPages), showPath(p.Total))
			}
		}
		p.Provenance = "extension:" + name
		return p, true
	}
	return Plan{}, false
}

// speakeasyPlan reads x-speakeasy-pagination:
//
//	type: offsetLimit | cursor | url
//	inputs: [{name, in: parameters | requestBody, type: page | offset | limit | cursor}]
//	outputs: {results, numPages, nextCursor, nextUrl}   (JSONPath)
func speakeasyPlan(t *tools.Tool, v any, req paramOffer) (Plan, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return Plan{}, false
	}
	p := Plan{Strategy: None, SizeParam: req.size.name}
	var driving tools.Location
	inputs, _ := m["inputs"].([]any)
	for _, in := range inputs {
		im, _ := in.(map[string]any)
		wire, _ := im["name"].(string)
		if wire == "" {
			continue
		}
		name, loc := paramNamed(t, wire, extString(im["in"]) == "requestBody")
		switch strings.ToLower(extString(im["type"])) {
		case "page":
			p.PageParam, driving = name, loc
		case "offset":
			p.OffsetParam, driving = name, loc
		case "limit":
			p.SizeParam = name
		case "cursor":
			p.CursorParam, driving = name, loc
		}
	}
	out, _ := m["outputs"].(map[string]any)
	if r, _, ok := extPath(extString(out["results"])); ok {
		p.Items, p.ItemsFound = r, true
	}
	if r, _, ok := extPath(extString(out["numPages"])); ok && r != "" {
		p.TotalPages = r
	}
	switch strings.ToLower(extString(m["type"])) {
	case "offsetlimit":
		switch {
		case p.PageParam != "":
			p.Strategy = PageNumber
		case p.OffsetParam != "":
			p.Strategy = Offset
		default:
			return Plan{}, false
		}
		p.Continuation = showPath(p.TotalPages)
	case "cursor":
		if p.CursorParam == "" {
			return Plan{}, false
		}
		p.Strategy = Cursor
		path, fromItem, ok := extPath(extString(out["nextCursor"]))
		switch {
		case ok && fromItem != "":
			p.CursorFromItem = fromItem
			if !p.ItemsFound {
				p.Items, p.ItemsFound = path, true
			}
		case ok && path != "":
			p.NextToken, p.Continuation = path, showPath(path)
		}
	case "url":
		path, _, ok := extPath(extString(out["nextUrl"]))
		if !ok || path == "" {
			return Plan{}, false
		}
		p.Strategy, p.NextURLField, p.Continuation = NextURL, path, showPath(path)
	default:
		return Plan{}, false
	}
	p.ParamsIn = string(driving)
	if p.ParamsIn == "" && p.Strategy != NextURL {
		p.ParamsIn = string(tools.InQuery)
	}
	return p, true
}

// msPageablePlan reads x-ms-pageable {nextLinkName, itemName}: the next
// page is the URL in nextLinkName (null: everything comes in one page),
// the items are in itemName ("value" when absent).
func msPageablePlan(v any, req paramOffer) (Plan, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return Plan{}, false
	}
	item := extString(m["itemName"])
	if item == "" {
		item = "value"
	}
	p := Plan{Strategy: None, Items: query.JoinPath(item), ItemsFound: true}
	if next := extString(m["nextLinkName"]); next != "" {
		p.Strategy, p.NextURLField = NextURL, query.JoinPath(next)
		p.Continuation = next
		p.SizeParam = req.size.name
		p.ParamsIn = string(req.size.in)
	}
	return p, true
}

// fernPlan reads x-fern-pagination {cursor, next_cursor, offset, step,
// results, has-next-page, next_uri, next_path} ($request.x / $response.y).
// Fern's offset may name a page number.
func fernPlan(t *tools.Tool, v any, req paramOffer) (Plan, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return Plan{}, false // `true` at document level says nothing per operation
	}
	p := Plan{Strategy: None, SizeParam: req.size.name}
	param := func(key string) (string, tools.Location) {
		path, _, ok := extPath(extString(m[key]))
		if !ok || path == "" {
			return "", ""
		}
		keys, err := query.SplitPath(path)
		if err != nil || len(keys) == 0 {
			return "", ""
		}
		return paramNamed(t, keys[len(keys)-1], len(keys) > 1)
	}
	resp := func(key string) string {
		path, _, ok := extPath(extString(m[key]))
		if !ok {
			return ""
		}
		return path
	}
	if r, _, ok := extPath(extString(m["results"])); ok {
		p.Items, p.ItemsFound = r, true
	}
	if s, _ := param("step"); s != "" {
		p.SizeParam = s
	}
	if h := resp("has-next-page"); h != "" {
		p.MoreFlag = h
	}
	var driving tools.Location
	switch {
	case resp("next_uri") != "" || resp("next_path") != "":
		p.Strategy, p.NextURLField = NextURL, firstNonEmpty(resp("next_uri"), resp("next_path"))
		p.Continuation = showPath(p.NextURLField)
		if c, loc := param("cursor"); c != "" {
			p.CursorParam, driving = c, loc
		}
	case extString(m["cursor"]) != "":
		p.CursorParam, driving = param("cursor")
		if p.CursorParam == "" {
			return Plan{}, false
		}
		p.Strategy, p.NextToken = Cursor, resp("next_cursor")
		p.Continuation = showPath(firstNonEmpty(p.NextToken, p.MoreFlag))
	case extString(m["offset"]) != "":
		name, loc := param("offset")
		if name == "" {
			return Plan{}, false
		}
		driving = loc
		if slices.Contains(pageNames, foldName(lastSegment(name))) {
			p.Strategy, p.PageParam = PageNumber, name
		} else {
			p.Strategy, p.OffsetParam = Offset, name
		}
		p.Continuation = showPath(p.MoreFlag)
	default:
		return Plan{}, false
	}
	p.ParamsIn = string(driving)
	return p, true
}

// xPaginationPlan reads Datadog's x-pagination (its client generator's):
//
//	{cursorParam, cursorPath, limitParam, pageOffsetParam, pageParam, pageStart, resultsPath}
//
// Parameters are wire names ("page[cursor]") or, in a request body,
// "body.<path>" ("body.page.cursor"); paths are dotted response paths.
func xPaginationPlan(t *tools.Tool, v any, req paramOffer) (Plan, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return Plan{}, false
	}
	param := func(key string) (string, tools.Location) {
		ref := extString(m[key])
		if ref == "" {
			return "", ""
		}
		if rest, ok := strings.CutPrefix(ref, "body."); ok {
			keys := strings.Split(rest, ".")
			name, loc := paramNamed(t, keys[0], true)
			if len(keys) > 1 {
				name = strings.Join(append([]string{name}, keys[1:]...), ".")
			}
			return name, loc
		}
		return paramNamed(t, ref, false)
	}
	p := Plan{Strategy: None, SizeParam: req.size.name}
	if s, _ := param("limitParam"); s != "" {
		p.SizeParam = s
	}
	if r := extString(m["resultsPath"]); r != "" {
		p.Items, p.ItemsFound = query.JoinPath(strings.Split(r, ".")...), true
	}
	var driving tools.Location
	switch {
	case extString(m["cursorParam"]) != "":
		p.CursorParam, driving = param("cursorParam")
		p.Strategy = Cursor
		if c := extString(m["cursorPath"]); c != "" {
			p.NextToken = query.JoinPath(strings.Split(c, ".")...)
			p.Continuation = c
		}
	case extString(m["pageOffsetParam"]) != "":
		p.OffsetParam, driving = param("pageOffsetParam")
		p.Strategy = Offset
	case extString(m["pageParam"]) != "":
		p.PageParam, driving = param("pageParam")
		p.Strategy = PageNumber
	default:
		return Plan{}, false
	}
	p.ParamsIn = string(driving)
	return p, true
}

func extString(v any) string {
	s, _ := v.(string)
	return s
}

// paramNamed finds the tool parameter an extension names by its wire
// name: a parameter, or a property one level down in the body. An
// unknown name is kept as written.
func paramNamed(t *tools.Tool, wire string, body bool) (string, tools.Location) {
	for _, p := range t.Params {
		if (p.WireName() == wire || p.Name == wire) && (!body || p.In == tools.InBody) {
			return p.Name, p.In
		}
	}
	for _, p := range t.Params {
		if p.In == tools.InBody && p.Schema != nil && p.Schema.Properties[wire] != nil {
			return p.Name + "." + wire, tools.InBody
		}
	}
	if body {
		return wire, tools.InBody
	}
	return wire, tools.InQuery
}

// extPath turns an extension's JSONPath-like reference ("$.data",
// "$response.meta.next", "$['data'][-1].id") into a field path. A [-1]
// step means "the last item": the path before it is the items' and the
// rest is returned as fromItem. ok is false for an empty or unreadable
// reference.
func extPath(ref string) (path, fromItem string, ok bool) {
	ref = strings.TrimSpace(ref)
	for _, pre := range []string{"$response", "$request", "$"} {
		if strings.HasPrefix(ref, pre) {
			ref = ref[len(pre):]
			break
		}
	}
	if ref == "" {
		return "", "", false
	}
	var keys, tail []string
	dst := &keys
	for ref != "" {
		switch {
		case ref[0] == '.':
			ref = ref[1:]
		case ref[0] == '[':
			end := strings.IndexByte(ref, ']')
			if end < 0 {
				return "", "", false
			}
			inner := strings.Trim(ref[1:end], `'" `)
			ref = ref[end+1:]
			if inner == "-1" {
				if dst == &tail {
					return "", "", false
				}
				dst = &tail
				continue
			}
			*dst = append(*dst, inner)
		default:
			end := strings.IndexAny(ref, ".[")
			if end < 0 {
				end = len(ref)
			}
			*dst = append(*dst, ref[:end])
			ref = ref[end:]
		}
	}
	if dst == &tail && len(tail) == 0 {
		return "", "", false
	}
	return query.JoinPath(keys...), strings.Join(tail, "."), true
}
