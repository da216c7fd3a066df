package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// ---- lenient import: repair what has one repair, skip the rest per operation ----

// ImportWarning is one repair or skip a lenient import made. Repairs of
// one kind are reported once, with how many places they touched and the
// first of them.
type ImportWarning struct {
	// Action is "repaired" (the document was changed and the operations
	// using the part are imported) or "skipped" (the operation is not
	// imported).
	Action string `json:"action"`
	// Where is the operation ("GET /v2/catalog/list"; "* /path" for every
	// operation of a path) or a JSON pointer
	// into the document ("/components/requestBodies/Order").
	Where string `json:"where"`
	// Detail says what was wrong and what was done.
	Detail string `json:"detail"`
	// Count is how many places a repair touched (1 for a skip).
	Count int `json:"count"`
}

func (w ImportWarning) String() string {
	s := w.Action + " " + w.Where + ": " + w.Detail
	if w.Count > 1 {
		s += fmt.Sprintf(" (%d places)", w.Count)
	}
	return s
}

// Import warning actions.
const (
	Repaired = "repaired"
	Skipped  = "skipped"
)

// ImportReport is what an import yields: the tools, and every repair and
// skip made on the way. A document kin-openapi loads as it is and whose
// every operation becomes a tool has no warnings.
type ImportReport struct {
	Tools    []*Tool
	Warnings []ImportWarning
}

// Count returns how many warnings have the action ("repaired", "skipped").
func (r *ImportReport) Count(action string) int {
	n := 0
	for _, w := range r.Warnings {
		if w.Action == action {
			n++
		}
	}
	return n
}

// Summary is one line for a log: "446 tools; 2 repairs, 1 operation skipped".
func (r *ImportReport) Summary() string {
	s := fmt.Sprintf("%d tool%s", len(r.Tools), plural(len(r.Tools)))
	rep, skip := r.Count(Repaired), r.Count(Skipped)
	if rep+skip == 0 {
		return s
	}
	return s + fmt.Sprintf("; %d repair%s, %d operation%s skipped", rep, plural(rep), skip, plural(skip))
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// repairLog collects warnings, folding repairs of one kind into one.
type repairLog struct {
	list  []ImportWarning
	index map[string]int // Action+Detail → position, for repairs
}

func (l *repairLog) repaired(where, detail string) {
	if l.index == nil {
		l.index = map[string]int{}
	}
	if i, ok := l.index[detail]; ok {
		l.list[i].Count++
		return
	}
	l.index[detail] = len(l.list)
	l.list = append(l.list, ImportWarning{Action: Repaired, Where: where, Detail: detail, Count: 1})
}

func (l *repairLog) skipped(where, detail string) {
	for _, w := range l.list {
		if w.Action == Skipped && w.Where == where {
			return // one reason per operation is enough
		}
	}
	l.list = append(l.list, ImportWarning{Action: Skipped, Where: where, Detail: detail, Count: 1})
}

// loadLenient is called when kin-openapi refuses data: it decodes the
// document as a plain tree, repairs what has exactly one repair, drops
// the operations that cannot be repaired, and loads the result. It
// fails only when no operation is left or the tree does not decode;
// strictErr is the strict loader's error, kept for those cases.
func loadLenient(ctx context.Context, data []byte, location *url.URL, strictErr error, log *repairLog) (*openapi3.T, error) {
	ints := map[string]bool{}
	root, err := decodeTree(data, ints)
	if err != nil {
		return nil, strictErr
	}
	doc, ok := root.(map[string]any)
	if !ok {
		return nil, strictErr
	}
	lt := &lenientTree{root: doc, intKeys: ints, log: log, skip: map[opKey]string{}, location: location}
	total := len(lt.operations())
	lt.repair()
	const maxRounds = 64
	var lastErr error
	for round := 0; round < maxRounds; round++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		lt.dropSkipped()
		if len(lt.operations()) == 0 && total > 0 {
			return nil, lt.refusal(strictErr)
		}
		out, err := json.Marshal(lt.root)
		if err != nil {
			return nil, strictErr
		}
		loaded, err := loadV3(ctx, out, location)
		if err == nil {
			return loaded, nil
		}
		lastErr = err
		// The loader names where it failed in most errors; follow it.
		if lt.blame(err) {
			lt.repair() // a dropped component leaves refs to repair or skip
			continue
		}
		// Otherwise find the operations that fail by halving.
		if !lt.bisect(ctx, location) {
			break
		}
	}
	if lastErr == nil {
		lastErr = strictErr
	}
	return nil, fmt.Errorf("loading document: %w", lastErr)
}

// decodeTree decodes JSON or YAML into plain values (map[string]any,
// []any, scalars). Keys YAML wrote as non-strings (status codes as
// integers) are turned into strings and their JSON pointers noted in ints.
func decodeTree(data []byte, ints map[string]bool) (any, error) {
	root, err := decodeDocument(data)
	if err != nil {
		return nil, err
	}
	return stringKeys(root, "", ints), nil
}

func stringKeys(v any, at string, ints map[string]bool) any {
	switch x := v.(type) {
	case map[string]any:
		for k, child := range x {
			x[k] = stringKeys(child, at+"/"+escapePointer(k), ints)
		}
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, child := range x {
			ks := fmt.Sprint(k)
			if _, isStr := k.(string); !isStr {
				ints[at+"/"+escapePointer(ks)] = true
			}
			m[ks] = stringKeys(child, at+"/"+escapePointer(ks), ints)
		}
		return m
	case []any:
		for i, child := range x {
			x[i] = stringKeys(child, at+"/"+strconv.Itoa(i), ints)
		}
	}
	return v
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func unescapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

// opKey names one operation of the tree.
type opKey struct{ path, method string }

func (k opKey) String() string { return strings.ToUpper(k.method) + " " + k.path }

// lenientTree is a decoded document under repair.
type lenientTree struct {
	root    map[string]any
	intKeys map[string]bool
	log     *repairLog
	skip    map[opKey]string // operations to drop, with the reason
	cur     *opKey           // the operation being walked, if any
	// location is the document's file (nil for one held in memory): refs
	// to other files resolve against it.
	location *url.URL
}

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

func (lt *lenientTree) paths() map[string]any {
	p, _ := lt.root["paths"].(map[string]any)
	return p
}

// operations lists the operations of the tree, sorted.
func (lt *lenientTree) operations() []opKey {
	var out []opKey
	for _, path := range sortedKeys(lt.paths()) {
		item, _ := lt.paths()[path].(map[string]any)
		for _, m := range httpMethods {
			if _, ok := item[m].(map[string]any); ok {
				out = append(out, opKey{path, m})
			}
		}
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func (lt *lenientTree) dropSkipped() {
	for k, reason := range lt.skip {
		item, _ := lt.paths()[k.path].(map[string]any)
		if item == nil {
			continue
		}
		if _, ok := item[k.method]; !ok {
			continue
		}
		delete(item, k.method)
		lt.log.skipped(k.String(), reason)
	}
}

// refusal is the error for a document left with no usable operation.
func (lt *lenientTree) refusal(strictErr error) error {
	reasons := make([]string, 0, 3)
	for _, w := range lt.log.list {
		if w.Action == Skipped && len(reasons) < 3 {
			reasons = append(reasons, w.Where+": "+w.Detail)
		}
	}
	return fmt.Errorf("loading document: no operation is usable (%s): %w", strings.Join(reasons, "; "), strictErr)
}

// ---- the repairs, walked with each node's OpenAPI kind known ----

type nodeKind string

const (
	kindSchema      nodeKind = "schema"
	kindResponse    nodeKind = "response"
	kindRequestBody nodeKind = "requestBody"
	kindParameter   nodeKind = "parameter"
	kindHeader      nodeKind = "header"
	kindPathItem    nodeKind = "pathItem"
	kindOther       nodeKind = ""
)

// componentKinds maps a components section to the kind of its entries.
var componentKinds = map[string]nodeKind{
	"schemas": kindSchema, "responses": kindResponse, "requestBodies": kindRequestBody,
	"parameters": kindParameter, "headers": kindHeader, "pathItems": kindPathItem,
}

// repair walks the whole tree, fixing nodes in place, again while a walk
// removes components (refs to them need the next walk).
func (lt *lenientTree) repair() {
	for range 4 {
		if !lt.repairOnce() {
			return
		}
	}
}

// repairOnce walks the tree once; it reports whether a component was
// removed.
func (lt *lenientTree) repairOnce() (removed bool) {
	if comps, ok := lt.root["components"].(map[string]any); ok {
		for _, sec := range sortedKeys(comps) {
			kind, known := componentKinds[sec]
			entries, _ := comps[sec].(map[string]any)
			if !known || entries == nil {
				continue
			}
			for _, name := range sortedKeys(entries) {
				at := "/components/" + sec + "/" + escapePointer(name)
				if !lt.walk(entries, name, kind, at) {
					// A component that cannot stand is dropped; refs to it
					// are repaired or skipped on the next walk.
					delete(entries, name)
					removed = true
					lt.log.repaired(at, "component "+sec+"/"+name+" is unusable and was removed")
				}
			}
		}
	}
	paths := lt.paths()
	for _, path := range sortedKeys(paths) {
		item, ok := paths[path].(map[string]any)
		if !ok {
			continue
		}
		if ref, ok := item["$ref"].(string); ok && strings.HasPrefix(ref, "#/") {
			if _, found := lt.resolve(ref); !found {
				// A path item that is only a dangling ref holds no usable
				// operation.
				delete(paths, path)
				lt.log.skipped("* "+path, "the path item's $ref "+ref+" does not resolve")
				continue
			}
		}
		at := "/paths/" + escapePointer(path)
		lt.walkPathItem(item, path, at)
	}
	return removed
}

func (lt *lenientTree) walkPathItem(item map[string]any, path, at string) {
	if params, ok := item["parameters"].([]any); ok {
		// A broken path-level parameter breaks each operation of the path.
		for i := range params {
			if !lt.walkIndex(params, i, kindParameter, at+"/parameters/"+strconv.Itoa(i)) {
				for _, m := range httpMethods {
					if _, ok := item[m].(map[string]any); ok {
						lt.skip[opKey{path, m}] = "path parameter " + strconv.Itoa(i) + " cannot be repaired"
					}
				}
			}
		}
	}
	for _, m := range httpMethods {
		op, ok := item[m].(map[string]any)
		if !ok {
			continue
		}
		k := opKey{path, m}
		lt.cur = &k
		lt.walkOperation(op, at+"/"+m)
		lt.cur = nil
	}
}

func (lt *lenientTree) walkOperation(op map[string]any, at string) {
	if params, ok := op["parameters"].([]any); ok {
		for i := range params {
			lt.walkIndex(params, i, kindParameter, at+"/parameters/"+strconv.Itoa(i))
		}
	}
	if _, ok := op["requestBody"]; ok {
		lt.walk(op, "requestBody", kindRequestBody, at+"/requestBody")
	}
	if responses, ok := op["responses"].(map[string]any); ok {
		lt.repairStatusKeys(responses, at+"/responses")
		for _, code := range sortedKeys(responses) {
			lt.walk(responses, code, kindResponse, at+"/responses/"+escapePointer(code))
		}
	}
}

// statusRange matches a status range written in lower case ("2xx").
var statusRange = regexp.MustCompile(`^[1-5][xX][xX]$`)

// repairStatusKeys writes status codes as OpenAPI wants them: strings
// (YAML's 200: is an integer key) and ranges in upper case (2XX).
func (lt *lenientTree) repairStatusKeys(responses map[string]any, at string) {
	for _, code := range sortedKeys(responses) {
		ptr := at + "/" + escapePointer(code)
		if lt.intKeys[ptr] {
			lt.log.repaired(ptr, "status codes written as integers were read as strings")
			delete(lt.intKeys, ptr)
		}
		if statusRange.MatchString(code) && code != strings.ToUpper(code) {
			up := strings.ToUpper(code)
			if _, taken := responses[up]; !taken {
				responses[up] = responses[code]
				delete(responses, code)
				lt.log.repaired(ptr, "status ranges written in lower case ("+code+") were read as "+up)
			}
		}
	}
}

// walkIndex is walk for an element of a list.
func (lt *lenientTree) walkIndex(list []any, i int, kind nodeKind, at string) bool {
	box := map[string]any{"v": list[i]}
	ok := lt.walk(box, "v", kind, at)
	list[i] = box["v"]
	return ok
}

// walk checks and repairs parent[key], a node of the given kind at JSON
// pointer at. It reports false when the node cannot be repaired: inside
// an operation, the operation is then marked to be skipped.
func (lt *lenientTree) walk(parent map[string]any, key string, kind nodeKind, at string) bool {
	node, ok := parent[key].(map[string]any)
	if !ok {
		return true // booleans (additionalProperties: false), odd values: left to the loader
	}
	if ref, ok := node["$ref"].(string); ok {
		repl, ok := lt.checkRef(ref, kind, at)
		if !ok {
			if lt.cur != nil {
				lt.skip[*lt.cur] = fmt.Sprintf("$ref %s at %s cannot be repaired", ref, at)
			}
			return false
		}
		if repl != nil {
			parent[key] = repl
			node = repl
			if _, still := repl["$ref"]; still {
				return true // a ref to the right kind now; its target is walked on its own
			}
		} else {
			return true
		}
	}
	switch kind {
	case kindSchema:
		lt.walkSchema(node, at)
	case kindParameter, kindHeader:
		lt.walk(node, "schema", kindSchema, at+"/schema")
		lt.walkContent(node, at)
	case kindRequestBody:
		lt.walkContent(node, at)
	case kindResponse:
		if _, has := node["description"]; !has {
			node["description"] = ""
			lt.log.repaired(at, "responses without the required description were given an empty one")
		}
		if headers, ok := node["headers"].(map[string]any); ok {
			for _, h := range sortedKeys(headers) {
				lt.walk(headers, h, kindHeader, at+"/headers/"+escapePointer(h))
			}
		}
		lt.walkContent(node, at)
	case kindPathItem:
		// A path item component: its operations are imported where a
		// path refers to it, so only its refs are checked here.
		saved := lt.cur
		lt.cur = nil
		lt.walkOperation(node, at)
		lt.cur = saved
	}
	return true
}

func (lt *lenientTree) walkContent(node map[string]any, at string) {
	content, ok := node["content"].(map[string]any)
	if !ok {
		return
	}
	for _, mt := range sortedKeys(content) {
		media, ok := content[mt].(map[string]any)
		if !ok {
			continue
		}
		lt.walk(media, "schema", kindSchema, at+"/content/"+escapePointer(mt)+"/schema")
	}
}

// Schema keywords holding one schema, a list of them, or a map of them.
var (
	schemaOne  = []string{"items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else", "unevaluatedItems", "unevaluatedProperties", "additionalItems"}
	schemaList = []string{"allOf", "anyOf", "oneOf", "prefixItems"}
	schemaMap  = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)

func (lt *lenientTree) walkSchema(node map[string]any, at string) {
	for _, k := range schemaOne {
		if _, ok := node[k].(map[string]any); ok {
			lt.walk(node, k, kindSchema, at+"/"+k)
		}
	}
	for _, k := range schemaList {
		if list, ok := node[k].([]any); ok {
			for i := range list {
				lt.walkIndex(list, i, kindSchema, at+"/"+k+"/"+strconv.Itoa(i))
			}
		}
	}
	for _, k := range schemaMap {
		if m, ok := node[k].(map[string]any); ok {
			for _, name := range sortedKeys(m) {
				lt.walk(m, name, kindSchema, at+"/"+k+"/"+escapePointer(name))
			}
		}
	}
}

// checkRef checks a local $ref found where a node of kind want belongs.
// It returns the node to put in its place (nil: keep it) and false when
// there is no unambiguous repair. Refs to other files are left to the
// loader.
func (lt *lenientTree) checkRef(ref string, want nodeKind, at string) (map[string]any, bool) {
	if !strings.HasPrefix(ref, "#/") {
		if lt.fileRefOK(ref) {
			return nil, true // the loader follows it
		}
		if want == kindSchema {
			lt.log.repaired(at, fmt.Sprintf("$ref %s names a file that cannot be read; it was replaced by a schema accepting any value", ref))
			return map[string]any{}, true
		}
		return nil, false
	}
	target, found := lt.resolve(ref)
	if !found {
		if want == kindSchema {
			// Nothing is known of the value: any value is accepted.
			lt.log.repaired(at, fmt.Sprintf("dangling $ref %s was replaced by a schema accepting any value", ref))
			return map[string]any{}, true
		}
		return nil, false
	}
	have := refKind(ref)
	if have == kindOther || have == want {
		return nil, true
	}
	tmap, _ := target.(map[string]any)
	switch want {
	case kindRequestBody, kindResponse:
		switch have {
		case kindResponse, kindRequestBody:
			if content, ok := tmap["content"].(map[string]any); ok && len(content) > 0 {
				repl := map[string]any{"content": content}
				if d, ok := tmap["description"].(string); ok || want == kindResponse {
					repl["description"] = d
				}
				lt.log.repaired(at, fmt.Sprintf("a %s $ref to a %s component (%s) was replaced by that component's content", want, have, ref))
				return repl, true
			}
		case kindSchema:
			repl := map[string]any{"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": ref}}}}
			if want == kindResponse {
				repl["description"] = ""
			}
			lt.log.repaired(at, fmt.Sprintf("a %s $ref to a schema (%s) was read as a JSON body of that schema", want, ref))
			return repl, true
		}
	case kindSchema:
		if s := schemaOf(tmap); s != nil {
			lt.log.repaired(at, fmt.Sprintf("a schema $ref to a %s component (%s) was replaced by that component's schema", have, ref))
			return s, true
		}
	}
	return nil, false
}

// schemaOf is the schema a parameter, header, response or request body
// node holds: its own, or that of its JSON (else first) media type.
func schemaOf(node map[string]any) map[string]any {
	if node == nil {
		return nil
	}
	if s, ok := node["schema"].(map[string]any); ok {
		return s
	}
	content, _ := node["content"].(map[string]any)
	best, bestRank := map[string]any(nil), -1
	for _, mt := range sortedKeys(content) {
		media, _ := content[mt].(map[string]any)
		s, ok := media["schema"].(map[string]any)
		if !ok {
			continue
		}
		if r := mediaRank(strings.ToLower(mt), true); best == nil || r < bestRank {
			best, bestRank = s, r
		}
	}
	return best
}

// refKind is the kind of node a local ref points at, from its components
// section; kindOther for refs elsewhere.
func refKind(ref string) nodeKind {
	parts := strings.Split(strings.TrimPrefix(ref, "#/"), "/")
	if len(parts) == 3 && parts[0] == "components" {
		return componentKinds[parts[1]]
	}
	return kindOther
}

// fileRefOK reports that a ref to another document names a local file
// that exists (what the loader's part is after that is its own check).
func (lt *lenientTree) fileRefOK(ref string) bool {
	file, _, _ := strings.Cut(ref, "#")
	u, err := url.Parse(file)
	if err != nil || u.Host != "" || (u.Scheme != "" && u.Scheme != "file") {
		return false // only local files are followed
	}
	if lt.location == nil {
		return false // a document held in memory has no files beside it
	}
	p := u.Path
	if !filepath.IsAbs(p) {
		p = filepath.Join(filepath.Dir(filepath.FromSlash(lt.location.Path)), filepath.FromSlash(p))
	}
	info, err := os.Stat(p)
	return err == nil && !info.IsDir()
}

// resolve follows a local JSON pointer ref through the tree.
func (lt *lenientTree) resolve(ref string) (any, bool) {
	frag := strings.TrimPrefix(ref, "#")
	if u, err := url.PathUnescape(frag); err == nil {
		frag = u
	}
	var node any = lt.root
	for _, step := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
		step = unescapePointer(step)
		switch x := node.(type) {
		case map[string]any:
			v, ok := x[step]
			if !ok {
				return nil, false
			}
			node = v
		case []any:
			i, err := strconv.Atoi(step)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			node = x[i]
		default:
			return nil, false
		}
	}
	return node, true
}

// ---- failures the walk cannot see: follow the loader's own pointer ----

// loaderPointer finds the JSON pointer a kin-openapi error names
// ("… in /paths/~1a/get/parameters/0/schema/minLength", or a quoted
// "#/components/…" it was resolving).
var loaderPointer = regexp.MustCompile(`(?:\bin |"#)(/(?:paths|components)/[^\s"]+)`)

// blame drops what the loader's error points at: the operation (or every
// operation of the path) under /paths, the component under /components.
// It reports false when the error names no place it can act on.
func (lt *lenientTree) blame(err error) bool {
	m := loaderPointer.FindStringSubmatch(err.Error())
	if m == nil {
		return false
	}
	steps := strings.Split(strings.TrimPrefix(m[1], "/"), "/")
	for i := range steps {
		steps[i] = unescapePointer(steps[i])
	}
	reason := "the loader rejected it: " + shortError(err)
	switch steps[0] {
	case "paths":
		if len(steps) < 2 {
			return false
		}
		item, _ := lt.paths()[steps[1]].(map[string]any)
		if item == nil {
			return false
		}
		acted := false
		for _, meth := range httpMethods {
			if _, ok := item[meth].(map[string]any); !ok {
				continue
			}
			if len(steps) >= 3 && slices.Contains(httpMethods, steps[2]) && steps[2] != meth {
				continue
			}
			k := opKey{steps[1], meth}
			if _, done := lt.skip[k]; !done {
				lt.skip[k], acted = reason, true
			}
		}
		if len(steps) >= 3 && !slices.Contains(httpMethods, steps[2]) {
			// Path-level: nothing of the path item is usable.
			delete(lt.paths(), steps[1])
			for _, meth := range httpMethods {
				lt.log.skipped(opKey{steps[1], meth}.String(), reason)
			}
			return true
		}
		return acted
	case "components":
		if len(steps) < 3 {
			return false
		}
		comps, _ := lt.root["components"].(map[string]any)
		sec, _ := comps[steps[1]].(map[string]any)
		if _, ok := sec[steps[2]]; !ok {
			return false
		}
		delete(sec, steps[2])
		lt.log.repaired("/components/"+escapePointer(steps[1])+"/"+escapePointer(steps[2]),
			"component "+steps[1]+"/"+steps[2]+" was removed ("+reason+")")
		return true
	}
	return false
}

// shortError is the first line of an error, at most 200 characters.
func shortError(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// bisect finds operations that fail to load when the error names no
// place: it loads halves of the operations (with every component) and
// marks each operation that fails alone. It reports false when the
// components alone do not load, or when no operation was found to blame.
func (lt *lenientTree) bisect(ctx context.Context, location *url.URL) bool {
	ops := lt.operations()
	loads := func(keep []opKey) error {
		saved := lt.paths()
		sub := map[string]any{}
		for _, k := range keep {
			item, _ := saved[k.path].(map[string]any)
			dst, _ := sub[k.path].(map[string]any)
			if dst == nil {
				dst = map[string]any{}
				for key, v := range item {
					if !slices.Contains(httpMethods, key) {
						dst[key] = v
					}
				}
				sub[k.path] = dst
			}
			dst[k.method] = item[k.method]
		}
		lt.root["paths"] = sub
		defer func() { lt.root["paths"] = saved }()
		data, err := json.Marshal(lt.root)
		if err != nil {
			return err
		}
		_, err = loadV3(ctx, data, location)
		return err
	}
	if loads(nil) != nil {
		return false
	}
	found := false
	budget := maxBisectLoads
	var search func(part []opKey)
	search = func(part []opKey) {
		if len(part) == 0 || ctx.Err() != nil {
			return
		}
		err := loads(part)
		if err == nil {
			return
		}
		budget--
		if budget < 0 && len(part) > 1 {
			// Each load reads the whole document: past the budget, a
			// failing part is skipped whole rather than narrowed down.
			for _, k := range part {
				lt.skip[k] = "the loader rejected a group of operations it belongs to (" + shortError(err) + "), and the import stopped narrowing it down"
			}
			found = true
			return
		}
		if len(part) == 1 {
			lt.skip[part[0]] = "the loader rejected it: " + shortError(err)
			found = true
			return
		}
		mid := len(part) / 2
		search(part[:mid])
		search(part[mid:])
	}
	search(ops)
	return found
}

// maxBisectLoads bounds the loads one bisection makes (a load costs a
// whole document's parse and resolution).
const maxBisectLoads = 40

// errNothingUsable marks a document none of whose operations import.
var errNothingUsable = errors.New("no operation of the document is usable")
